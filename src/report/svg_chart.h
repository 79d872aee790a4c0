// Line charts and heat maps as inline SVG, drawn by our own code. There is no C++ charting
// library worth a dependency for this: the ones that exist plot through an external program
// (matplot++ drives gnuplot), come with a whole framework (ROOT) or are commercial
// (ChartDirector), and none writes the small self-contained SVG a report file wants. A chart is
// axes, ticks, polylines and a legend: a few hundred lines here.
//
// The root <svg> of each chart says how values map to pixels, so tests (and anyone) can read
// the data back: data-plot="LEFT TOP WIDTH HEIGHT" (the plot area in pixels), data-x="MIN MAX"
// and data-y="MIN MAX" (the value range of its edges; y grows upwards), data-yscale="linear" or
// "log" (log10 of the value is linear then). Each series is one <polyline> with data-run,
// data-metric and data-kind (which run and metric it draws; kind "raw" or "ema" for the loss),
// data-points (points drawn) and data-source-points (points logged before downsampling).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace lmtrain::report {

enum class LineStyle {
  kSolid,          // the main line (smoothed loss, any metric)
  kFaint,          // thin and translucent (the raw loss behind its smoothed line)
  kDashedMarkers,  // dashed, with a marker per point (evaluations)
};

struct LineSeries {
  std::string run, metric, kind;  // data-run, data-metric, data-kind ("raw", "ema", "") attributes
  std::string label;              // legend text
  std::string color;              // "#1f77b4"
  LineStyle style = LineStyle::kSolid;
  std::vector<double> x, y;  // the points to draw, x increasing (downsampled already)
  size_t source_points = 0;  // points before downsampling
};

struct LineChart {
  std::string id;  // unique in the page
  std::string title, x_label, y_label;
  bool x_is_count = true;  // x tick labels as counts (12k, 1.5M): steps and tokens
  std::vector<LineSeries> series;
};

// Log scale for y when every value is > 0 and they span at least 3 decades (a loss scale of
// 65536 halving to 1, say); linear otherwise.
std::string render_line_chart(const LineChart& chart);

struct HeatMap {
  std::string id, title, x_label, value_label;
  std::vector<std::string> row_labels;     // top to bottom: "layer 0", ...
  double x_min = 0, x_max = 0;             // the steps the columns span
  std::vector<std::vector<double>> cells;  // [row][column]; NaN = no value there
  std::string caption;                     // how a cell's value was made
};

// Cells coloured on viridis between the smallest and largest value, with a colour scale.
std::string render_heat_map(const HeatMap& map);

// The colour of run i (Tableau 10, repeating).
std::string run_color(size_t i);

}  // namespace lmtrain::report
