#include "report/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "report/xml_text.h"

namespace lmtrain::report {
namespace {

// Layout in pixels (the page shows charts at this size, two per row on a wide screen).
constexpr double kWidth = 560, kPlotHeight = 230;
constexpr double kLeft = 64, kRight = 16, kTop = 34, kBottom = 42;
constexpr double kLegendRow = 17, kCharWidth = 6.4;

// Values beyond this are not drawn (and the chart says how many): an axis that spans them
// overflows (1e308 - -1e308 is inf) and its pixels become nan. No metric worth a chart gets near.
constexpr double kDrawLimit = 1e150;

bool drawable(double v) { return std::isfinite(v) && std::fabs(v) <= kDrawLimit; }

bool drawable_point(const LineSeries& s, size_t i) { return drawable(s.x[i]) && drawable(s.y[i]); }

// "3 points beyond +/-1e150 (or not finite) are not drawn", for a chart that left some out.
std::string svg_skipped_note(size_t skipped) {
  return std::to_string(skipped) + (skipped == 1 ? " point" : " points") +
         " beyond +/-1e150 or not finite " + (skipped == 1 ? "is" : "are") + " not drawn";
}

// About `target` round tick values (1, 2, 5 x 10^k apart) between lo and hi.
std::vector<double> svg_linear_ticks(double lo, double hi, int target) {
  std::vector<double> ticks;
  const double range = hi - lo;
  if (!(range > 0) || !std::isfinite(range)) return {lo};
  const double raw = range / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double r = raw / mag;
  const double step = (r < 1.5 ? 1 : r < 3 ? 2 : r < 7 ? 5 : 10) * mag;
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) {
    ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
    if (ticks.size() > 50) break;
  }
  return ticks;
}

struct SvgAxis {
  double lo = 0, hi = 1;
  bool log = false;
  double pix_lo = 0, pix_hi = 1;  // pixels of lo and hi
  double map(double v) const {
    const double a = log ? std::log10(v) : v;
    const double b0 = log ? std::log10(lo) : lo, b1 = log ? std::log10(hi) : hi;
    return pix_lo + (a - b0) / (b1 - b0) * (pix_hi - pix_lo);
  }
};

// The legend: entries flow left to right in rows under the plot.
struct SvgLegendEntry {
  std::string label, color;
  LineStyle style;
};

std::string svg_style_attrs(LineStyle style, const std::string& color) {
  switch (style) {
    case LineStyle::kFaint:
      return "stroke=\"" + color + "\" stroke-width=\"1\" stroke-opacity=\"0.35\"";
    case LineStyle::kDashedMarkers:
      return "stroke=\"" + color + "\" stroke-width=\"1.5\" stroke-dasharray=\"5 3\"";
    case LineStyle::kSolid:
      break;
  }
  return "stroke=\"" + color + "\" stroke-width=\"1.6\"";
}

// Rows of legend entries that fit kWidth; returns the SVG and sets `height`.
std::string svg_legend(const std::vector<SvgLegendEntry>& entries, double top, double& height) {
  std::string out;
  double x = kLeft, y = top + 12;
  int rows = entries.empty() ? 0 : 1;
  for (const auto& e : entries) {
    const double w = 28 + kCharWidth * static_cast<double>(e.label.size()) + 14;
    if (x + w > kWidth - kRight && x > kLeft) {
      x = kLeft;
      y += kLegendRow;
      ++rows;
    }
    out += "<line x1=\"" + coord(x) + "\" y1=\"" + coord(y - 4) + "\" x2=\"" + coord(x + 22) +
           "\" y2=\"" + coord(y - 4) + "\" " +
           // A faint line's sample is drawn thicker, or it would not show in the legend.
           (e.style == LineStyle::kFaint
                ? "stroke=\"" + e.color + "\" stroke-width=\"3\" stroke-opacity=\"0.35\""
                : svg_style_attrs(e.style, e.color)) +
           "/>";
    out += "<text x=\"" + coord(x + 28) + "\" y=\"" + coord(y) + "\" class=\"legend\">" +
           xml_escape(e.label) + "</text>";
    x += w;
  }
  height = rows * kLegendRow + (rows ? 8 : 0);
  return "<g class=\"legend\">" + out + "</g>";
}

// Large values as counts (150k tokens/s), others as numbers.
std::string svg_tick_label_y(double v) {
  return std::fabs(v) >= 1e4 ? format_count(v) : format_number(v);
}

}  // namespace

std::string run_color(size_t i) {
  static const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  return kPalette[i % 10];
}

std::string render_line_chart(const LineChart& chart) {
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo;
  double y_lo = x_lo, y_hi = -x_lo;
  size_t skipped = 0;
  for (const auto& s : chart.series) {
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!drawable_point(s, i)) {
        ++skipped;
        continue;
      }
      x_lo = std::min(x_lo, s.x[i]);
      x_hi = std::max(x_hi, s.x[i]);
      y_lo = std::min(y_lo, s.y[i]);
      y_hi = std::max(y_hi, s.y[i]);
    }
  }
  if (!std::isfinite(x_lo)) x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;
  if (x_hi == x_lo) x_lo -= 1, x_hi += 1;  // one point (a single evaluation): in the middle
  SvgAxis xa{x_lo, x_hi, false, kLeft, kWidth - kRight};
  SvgAxis ya;
  ya.log = y_lo > 0 && y_hi / y_lo >= 1e3;
  if (ya.log) {
    // Whole decades at the edges.
    ya.lo = std::pow(10.0, std::floor(std::log10(y_lo)));
    ya.hi = std::pow(10.0, std::ceil(std::log10(y_hi)));
  } else if (y_hi == y_lo) {
    const double pad = y_lo == 0 ? 1 : std::fabs(y_lo) * 0.05;
    ya.lo = y_lo - pad;
    ya.hi = y_hi + pad;
  } else {
    const double pad = (y_hi - y_lo) * 0.04;
    ya.lo = y_lo - pad;
    ya.hi = y_hi + pad;
  }
  ya.pix_lo = kTop + kPlotHeight;
  ya.pix_hi = kTop;

  std::vector<SvgLegendEntry> legend;
  for (const auto& s : chart.series) legend.push_back({s.label, s.color, s.style});
  double legend_height = 0;
  const std::string legend_svg =
      svg_legend(legend, kTop + kPlotHeight + kBottom - 6, legend_height);
  const double height = kTop + kPlotHeight + kBottom + legend_height;

  std::string out;
  out.reserve(4096);
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" id=\"" + xml_escape(chart.id) +
         "\" width=\"" + coord(kWidth) + "\" height=\"" + coord(height) + "\" viewBox=\"0 0 " +
         coord(kWidth) + " " + coord(height) + "\" data-plot=\"" + coord(kLeft) + " " +
         coord(kTop) + " " + coord(kWidth - kLeft - kRight) + " " + coord(kPlotHeight) +
         "\" data-x=\"" + format_number(xa.lo) + " " + format_number(xa.hi) + "\" data-y=\"" +
         format_number(ya.lo) + " " + format_number(ya.hi) + "\" data-yscale=\"" +
         (ya.log ? "log" : "linear") + "\">";
  // Exact edge values for readers (the attributes above are rounded for people).
  char exact[160];
  std::snprintf(exact, sizeof(exact), "<desc>x %.17g %.17g y %.17g %.17g</desc>", xa.lo, xa.hi,
                ya.lo, ya.hi);
  out += exact;
  out += "<text x=\"" + coord(kLeft) + "\" y=\"18\" class=\"title\">" + xml_escape(chart.title) +
         "</text>";
  out += "<rect x=\"" + coord(kLeft) + "\" y=\"" + coord(kTop) + "\" width=\"" +
         coord(kWidth - kLeft - kRight) + "\" height=\"" + coord(kPlotHeight) +
         "\" class=\"plot\"/>";

  // Grid and tick labels.
  out += "<g class=\"grid\">";
  std::vector<double> yticks;
  if (ya.log) {
    for (double e = std::log10(ya.lo); e <= std::log10(ya.hi) + 1e-9; e += 1) {
      yticks.push_back(std::pow(10.0, e));
    }
    if (yticks.size() > 8) {  // every other decade
      std::vector<double> thin;
      for (size_t i = 0; i < yticks.size(); i += 2) thin.push_back(yticks[i]);
      yticks = thin;
    }
  } else {
    yticks = svg_linear_ticks(ya.lo, ya.hi, 5);
  }
  for (double t : yticks) {
    if (t < ya.lo || t > ya.hi) continue;
    const std::string y = coord(ya.map(t));
    out += "<line x1=\"" + coord(kLeft) + "\" y1=\"" + y + "\" x2=\"" + coord(kWidth - kRight) +
           "\" y2=\"" + y + "\"/>";
    out += "<text x=\"" + coord(kLeft - 5) + "\" y=\"" + y + "\" dy=\"4\" class=\"ytick\">" +
           svg_tick_label_y(t) + "</text>";
  }
  for (double t : svg_linear_ticks(xa.lo, xa.hi, 6)) {
    if (t < xa.lo || t > xa.hi) continue;
    if (chart.x_is_count && t != std::round(t)) continue;  // no step 249.6
    const std::string x = coord(xa.map(t));
    out += "<line x1=\"" + x + "\" y1=\"" + coord(kTop) + "\" x2=\"" + x + "\" y2=\"" +
           coord(kTop + kPlotHeight) + "\"/>";
    out += "<text x=\"" + x + "\" y=\"" + coord(kTop + kPlotHeight + 15) + "\" class=\"xtick\">" +
           (chart.x_is_count ? format_count(t) : format_number(t)) + "</text>";
  }
  out += "</g>";
  out += "<text x=\"" + coord(kLeft + (kWidth - kLeft - kRight) / 2) + "\" y=\"" +
         coord(kTop + kPlotHeight + 32) + "\" class=\"xlabel\">" + xml_escape(chart.x_label) +
         "</text>";
  out += "<text transform=\"translate(13 " + coord(kTop + kPlotHeight / 2) +
         ") rotate(-90)\" class=\"ylabel\">" + xml_escape(chart.y_label) + "</text>";

  // The series: faint ones first, so the solid lines lie on top.
  for (const LineStyle pass : {LineStyle::kFaint, LineStyle::kSolid, LineStyle::kDashedMarkers}) {
    for (const auto& s : chart.series) {
      if (s.style != pass) continue;
      std::string points;
      points.reserve(s.x.size() * 12);
      size_t drawn = 0;
      for (size_t i = 0; i < s.x.size(); ++i) {
        if (!drawable_point(s, i)) continue;
        if (drawn++) points += ' ';
        points += coord(xa.map(s.x[i]));
        points += ',';
        points += coord(ya.map(s.y[i]));
      }
      out += "<polyline fill=\"none\" " + svg_style_attrs(s.style, s.color) + " data-run=\"" +
             xml_escape(s.run) + "\" data-metric=\"" + xml_escape(s.metric) + "\" data-kind=\"" +
             xml_escape(s.kind) + "\" data-points=\"" + std::to_string(drawn) +
             "\" data-source-points=\"" + std::to_string(s.source_points) + "\" points=\"" +
             points + "\"><title>" + xml_escape(s.label) + "</title></polyline>";
      if (s.style == LineStyle::kDashedMarkers && s.x.size() <= 400) {
        out += "<g fill=\"" + s.color + "\">";
        for (size_t i = 0; i < s.x.size(); ++i) {
          if (!drawable_point(s, i)) continue;
          out += "<circle cx=\"" + coord(xa.map(s.x[i])) + "\" cy=\"" + coord(ya.map(s.y[i])) +
                 "\" r=\"2.5\"><title>" + xml_escape(s.label) + ": " + format_number(s.y[i]) +
                 " at " + format_count(s.x[i]) + "</title></circle>";
        }
        out += "</g>";
      }
    }
  }
  if (skipped) {
    out += "<text x=\"" + coord(kLeft + 4) + "\" y=\"" + coord(kTop + 12) +
           "\" class=\"note\" data-skipped-points=\"" + std::to_string(skipped) + "\">" +
           xml_escape(svg_skipped_note(skipped)) + "</text>";
  }
  out += legend_svg;
  out += "</svg>";
  return out;
}

namespace {

// viridis at t in [0, 1], from 5 stops.
std::string svg_viridis(double t) {
  static const double kStops[5][3] = {
      {68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}};
  t = std::clamp(t, 0.0, 1.0) * 4;
  const int i = std::min(3, static_cast<int>(t));
  const double f = t - i;
  char buf[8];
  std::snprintf(buf, sizeof(buf), "#%02x%02x%02x",
                static_cast<int>(kStops[i][0] + f * (kStops[i + 1][0] - kStops[i][0]) + 0.5),
                static_cast<int>(kStops[i][1] + f * (kStops[i + 1][1] - kStops[i][1]) + 0.5),
                static_cast<int>(kStops[i][2] + f * (kStops[i + 1][2] - kStops[i][2]) + 0.5));
  return buf;
}

}  // namespace

std::string render_heat_map(const HeatMap& map) {
  const size_t rows = map.cells.size();
  const size_t cols = rows ? map.cells[0].size() : 0;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  size_t skipped = 0;
  for (const auto& row : map.cells) {
    for (double v : row) {
      if (std::isnan(v)) continue;
      if (!drawable(v)) {
        ++skipped;
        continue;
      }
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  if (!std::isfinite(lo)) lo = 0, hi = 1;
  const double row_h = std::clamp(180.0 / std::max<size_t>(rows, 1), 6.0, 22.0);
  const double plot_w = kWidth - kLeft - kRight - 70;  // room for the colour scale
  const double plot_h = row_h * static_cast<double>(rows);
  const double height = kTop + plot_h + kBottom + 10;
  const double cell_w = cols ? plot_w / static_cast<double>(cols) : plot_w;

  std::string out;
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart heatmap\" id=\"" +
         xml_escape(map.id) + "\" width=\"" + coord(kWidth) + "\" height=\"" + coord(height) +
         "\" viewBox=\"0 0 " + coord(kWidth) + " " + coord(height) + "\" data-rows=\"" +
         std::to_string(rows) + "\" data-columns=\"" + std::to_string(cols) + "\" data-min=\"" +
         format_number(lo) + "\" data-max=\"" + format_number(hi) + "\">";
  out += "<text x=\"" + coord(kLeft) + "\" y=\"18\" class=\"title\">" + xml_escape(map.title) +
         "</text>";
  for (size_t r = 0; r < rows; ++r) {
    const double y = kTop + row_h * static_cast<double>(r);
    if (rows <= 24 || r % ((rows + 23) / 24) == 0) {
      out += "<text x=\"" + coord(kLeft - 5) + "\" y=\"" + coord(y + row_h / 2) +
             "\" dy=\"4\" class=\"ytick\">" + xml_escape(map.row_labels[r]) + "</text>";
    }
    for (size_t c = 0; c < cols; ++c) {
      const double v = map.cells[r][c];
      if (!drawable(v)) continue;
      const double t = hi > lo ? (v - lo) / (hi - lo) : 0.5;
      // Cells overlap by a hair so no background shows between them.
      out += "<rect x=\"" + coord(kLeft + cell_w * static_cast<double>(c)) + "\" y=\"" + coord(y) +
             "\" width=\"" + coord(cell_w + 0.6) + "\" height=\"" + coord(row_h + 0.6) +
             "\" fill=\"" + svg_viridis(t) + "\"/>";
    }
  }
  // Step labels at both ends and the middle.
  for (int k = 0; k <= 2; ++k) {
    const double x = kLeft + plot_w * k / 2.0;
    const double step = map.x_min + (map.x_max - map.x_min) * k / 2.0;
    out += "<text x=\"" + coord(x) + "\" y=\"" + coord(kTop + plot_h + 15) + "\" class=\"xtick\">" +
           format_count(std::round(step)) + "</text>";
  }
  out += "<text x=\"" + coord(kLeft + plot_w / 2) + "\" y=\"" + coord(kTop + plot_h + 32) +
         "\" class=\"xlabel\">" + xml_escape(map.x_label) + "</text>";
  // The colour scale: 10 bands from lo (bottom) to hi (top).
  const double sx = kLeft + plot_w + 14, band = plot_h / 10;
  for (int b = 0; b < 10; ++b) {
    out += "<rect x=\"" + coord(sx) + "\" y=\"" + coord(kTop + plot_h - band * (b + 1)) +
           "\" width=\"12\" height=\"" + coord(band + 0.4) + "\" fill=\"" +
           svg_viridis((b + 0.5) / 10) + "\"/>";
  }
  out += "<text x=\"" + coord(sx + 16) + "\" y=\"" + coord(kTop + 8) + "\" class=\"scale\">" +
         format_number(hi) + "</text>";
  out += "<text x=\"" + coord(sx + 16) + "\" y=\"" + coord(kTop + plot_h) + "\" class=\"scale\">" +
         format_number(lo) + "</text>";
  out += "<text x=\"" + coord(sx + 16) + "\" y=\"" + coord(kTop + plot_h / 2 + 4) +
         "\" class=\"scale\">" + xml_escape(map.value_label) + "</text>";
  const std::string caption =
      map.caption + (skipped ? (map.caption.empty() ? "" : "; ") + svg_skipped_note(skipped) : "");
  if (!caption.empty()) {
    out += "<text x=\"" + coord(kLeft) + "\" y=\"" + coord(height - 4) + "\" class=\"caption\"" +
           (skipped ? " data-skipped-points=\"" + std::to_string(skipped) + "\"" : "") + ">" +
           xml_escape(caption) + "</text>";
  }
  out += "</svg>";
  return out;
}

}  // namespace lmtrain::report
