#include "report/charts.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "core/log.h"
#include "report/downsample.h"
#include "report/svg_chart.h"

namespace lmtrain::report {
namespace {

const char* kLossSection = "Loss";
const char* kEvalSection = "Evaluation";
const char* kTermsSection = "Objective terms";
const char* kOptimSection = "Optimisation";
const char* kSpeedSection = "Speed and memory";
const char* kMoeSection = "Mixture of experts";
const char* kOtherSection = "Other metrics";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
bool begins_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

// Title and axis label of the metrics we know; others use their name.
struct KnownMetric {
  const char* name;
  const char* title;
  const char* unit;
};
const KnownMetric kKnownMetrics[] = {
    {"val_ppl", "Validation perplexity", "perplexity"},
    {"lr", "Learning rate", "lr"},
    {"grad_norm", "Gradient norm (before clipping)", "norm"},
    {"loss_scale", "fp16 loss scale", "scale"},
    {"skipped_steps", "fp16 skipped steps (whole run)", "steps"},
    {"tokens_per_s", "Throughput", "tokens/s"},
    {"mfu", "Model FLOPs utilisation", "MFU"},
    {"peak_mem_mib", "Peak GPU memory", "MiB"},
    {"comm_wait_ms", "Gradient all-reduce wait not hidden by backward", "ms per step"},
    {"a2a_ms", "Expert all-to-all time", "ms per step"},
    {"kd_loss", "Distillation: KD term", "loss"},
    {"ce_loss", "Distillation: cross-entropy term", "loss"},
    {"feature_loss", "Distillation: feature term", "MSE"},
    {"expert_loss", "Distillation: MoE-output term", "MSE"},
};

const KnownMetric* known_metric(const std::string& name) {
  for (const auto& k : kKnownMetrics) {
    if (name == k.name) return &k;
  }
  return nullptr;
}

bool is_eval_metric(const std::string& name) {
  return name == "val_ppl" || ends_with(name, "_acc") || begins_with(name, "qa/") ||
         begins_with(name, "val_") || begins_with(name, "eval/") || ends_with(name, "/acc");
}

// A series made ready to draw: downsampled, x scaled (tokens), with its legend.
LineSeries make_line(const RunData& run, size_t run_index, const std::string& metric,
                     const std::string& kind, const std::vector<double>& step,
                     const std::vector<double>& value, double x_scale, LineStyle style,
                     const std::string& label) {
  LineSeries s;
  s.run = run.name;
  s.metric = metric;
  s.kind = kind;
  s.label = label;
  s.color = run_color(run_index);
  s.style = style;
  s.source_points = value.size();
  for (size_t i : downsample_indices(value)) {
    s.x.push_back(step[i] * x_scale);
    s.y.push_back(value[i]);
  }
  return s;
}

std::string chart_id(const std::string& prefix, const std::string& name) {
  std::string id = prefix;
  for (char c : name) id += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
  return id;
}

// Loss (raw + smoothed) and validation loss against steps, or tokens when `tokens`.
std::string loss_chart(const std::vector<RunData>& runs, bool tokens) {
  LineChart chart;
  chart.id = tokens ? "chart-loss-tokens" : "chart-loss-steps";
  chart.title = tokens ? "Loss against tokens" : "Loss against steps";
  chart.x_label = tokens ? "tokens" : "step";
  chart.y_label = "loss";
  std::string smoothing;
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto& run = runs[i];
    if (tokens && run.tokens_per_step <= 0) continue;
    const double scale = tokens ? static_cast<double>(run.tokens_per_step) : 1.0;
    const std::string prefix = runs.size() > 1 ? run.name + " " : "";
    if (auto it = run.metrics.scalars.find("loss");
        it != run.metrics.scalars.end() && !it->second.empty()) {
      const Series& s = it->second;
      const double beta = smoothing_beta(s.size());
      chart.series.push_back(make_line(run, i, "loss", "raw", s.step, s.value, scale,
                                       LineStyle::kFaint, prefix + "train"));
      chart.series.push_back(make_line(run, i, "loss", "ema", s.step, ema_smooth(s.value, beta),
                                       scale, LineStyle::kSolid,
                                       prefix + log::format("train (EMA %.3g)", beta)));
    }
    if (auto it = run.metrics.scalars.find("val_loss");
        it != run.metrics.scalars.end() && !it->second.empty()) {
      chart.series.push_back(make_line(run, i, "val_loss", "", it->second.step, it->second.value,
                                       scale, LineStyle::kDashedMarkers, prefix + "val"));
    }
  }
  if (chart.series.empty()) return "";
  return render_line_chart(chart);
}

std::string metric_chart(const std::vector<RunData>& runs, const std::string& name) {
  LineChart chart;
  chart.id = chart_id("chart-", name);
  const KnownMetric* known = known_metric(name);
  chart.title = known ? std::string(known->title) + " (" + name + ")" : name;
  chart.x_label = "step";
  chart.y_label = known ? known->unit : name;
  const bool eval = is_eval_metric(name);
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto it = runs[i].metrics.scalars.find(name);
    if (it == runs[i].metrics.scalars.end() || it->second.empty()) continue;
    chart.series.push_back(make_line(runs[i], i, name, "", it->second.step, it->second.value, 1.0,
                                     eval ? LineStyle::kDashedMarkers : LineStyle::kSolid,
                                     runs[i].name));
  }
  if (chart.series.empty()) return "";
  return render_line_chart(chart);
}

// layers x steps, each cell the largest value logged in its column's steps (so a spike shows).
std::string layer_heat_map(const RunData& run, const std::string& name,
                           const std::map<int64_t, Series>& layers, bool with_run_name) {
  constexpr size_t kColumns = 120;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const auto& [layer, s] : layers) {
    if (s.empty()) continue;
    lo = std::min(lo, s.step.front());
    hi = std::max(hi, s.step.back());
  }
  if (!std::isfinite(lo)) return "";
  // One column per logged step when they are few, else kColumns equal spans of steps.
  std::set<double> steps;
  for (const auto& [layer, s] : layers) {
    for (double x : s.step) {
      steps.insert(x);
      if (steps.size() > kColumns) break;
    }
  }
  const size_t cols = std::min(kColumns, steps.size());
  std::vector<double> distinct(steps.begin(), steps.end());
  auto column_of = [&](double x) -> size_t {
    if (steps.size() <= kColumns) {
      return static_cast<size_t>(std::lower_bound(distinct.begin(), distinct.end(), x) -
                                 distinct.begin());
    }
    const double t = hi > lo ? (x - lo) / (hi - lo) : 0;
    return std::min(cols - 1, static_cast<size_t>(t * static_cast<double>(cols)));
  };
  HeatMap map;
  map.id = chart_id("heat-" + run.name + "-", name);
  const std::string field = name.substr(name.rfind('/') + 1);
  map.title = (with_run_name ? run.name + ": " : std::string()) + name + " per layer";
  map.x_label = "step";
  map.value_label = field;
  map.x_min = lo;
  map.x_max = hi;
  map.caption = "each cell: the largest value logged in its steps";
  for (const auto& [layer, s] : layers) {
    map.row_labels.push_back("layer " + std::to_string(layer));
    std::vector<double> row(cols, std::numeric_limits<double>::quiet_NaN());
    for (size_t i = 0; i < s.size(); ++i) {
      double& cell = row[column_of(s.step[i])];
      if (std::isnan(cell) || s.value[i] > cell) cell = s.value[i];
    }
    map.cells.push_back(std::move(row));
  }
  return render_heat_map(map);
}

}  // namespace

std::string metric_section(const std::string& name) {
  if (name == "loss" || name == "val_loss") return kLossSection;
  if (is_eval_metric(name)) return kEvalSection;
  if (ends_with(name, "_loss")) return kTermsSection;
  if (name == "lr" || name == "grad_norm" || name == "loss_scale" || name == "skipped_steps") {
    return kOptimSection;
  }
  if (name == "tokens_per_s" || name == "mfu" || name == "peak_mem_mib" || name == "comm_wait_ms" ||
      name == "a2a_ms" || ends_with(name, "_mib") || ends_with(name, "_ms")) {
    return kSpeedSection;
  }
  if (begins_with(name, "moe/")) return kMoeSection;
  return kOtherSection;
}

std::vector<ChartSection> build_chart_sections(const std::vector<RunData>& runs) {
  std::vector<ChartSection> sections;
  for (const char* title : {kLossSection, kEvalSection, kTermsSection, kOptimSection, kSpeedSection,
                            kMoeSection, kOtherSection}) {
    sections.push_back({title, {}});
  }
  auto section = [&](const std::string& title) -> ChartSection& {
    for (auto& s : sections) {
      if (s.title == title) return s;
    }
    return sections.back();
  };
  for (const bool tokens : {false, true}) {
    const std::string svg = loss_chart(runs, tokens);
    if (!svg.empty()) section(kLossSection).svgs.push_back(svg);
  }
  // Every other scalar any run logged, in the order of the known list, then by name.
  std::set<std::string> names;
  for (const auto& r : runs) {
    for (const auto& [name, s] : r.metrics.scalars) {
      if (!s.empty()) names.insert(name);
    }
  }
  std::vector<std::string> ordered;
  for (const auto& k : kKnownMetrics) {
    if (names.count(k.name)) ordered.push_back(k.name);
  }
  for (const auto& n : names) {
    if (!known_metric(n)) ordered.push_back(n);
  }
  for (const auto& name : ordered) {
    if (name == "loss" || name == "val_loss" || name == "epoch" || name == "elapsed_s") continue;
    const std::string svg = metric_chart(runs, name);
    if (!svg.empty()) section(metric_section(name)).svgs.push_back(svg);
  }
  // Per-layer statistics: one heat map per run and statistic.
  for (const auto& r : runs) {
    for (const auto& [name, layers] : r.metrics.per_layer) {
      const std::string svg = layer_heat_map(r, name, layers, runs.size() > 1);
      if (!svg.empty()) section(kMoeSection).svgs.push_back(svg);
    }
  }
  std::vector<ChartSection> non_empty;
  for (auto& s : sections) {
    if (!s.svgs.empty()) non_empty.push_back(std::move(s));
  }
  return non_empty;
}

}  // namespace lmtrain::report
