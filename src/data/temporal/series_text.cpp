#include "data/temporal/series_text.h"

#include <cmath>
#include <cstdio>

#include "data/temporal/qa_templates.h"

namespace lmtrain::data::temporal {
namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string stat_list(const std::vector<double>& v) {
  if (v.size() == 1) return number(v[0]);
  std::string out = "(";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + number(v[i]);
  return out + ")";
}

}  // namespace

std::string series_stats_text(const SeriesValues& s) {
  std::vector<double> mean(static_cast<size_t>(s.channels), 0), stdev(mean);
  for (int64_t c = 0; c < s.channels; ++c) {
    double sum = 0, sq = 0;
    int64_t n = 0;
    for (int64_t t = 0; t < s.length; ++t) {
      const auto i = static_cast<size_t>(c * s.length + t);
      if (!s.valid[i]) continue;
      sum += s.values[i];
      ++n;
    }
    const double m = n ? sum / static_cast<double>(n) : 0;
    for (int64_t t = 0; t < s.length; ++t) {
      const auto i = static_cast<size_t>(c * s.length + t);
      if (s.valid[i]) sq += (s.values[i] - m) * (s.values[i] - m);
    }
    mean[static_cast<size_t>(c)] = m;
    stdev[static_cast<size_t>(c)] = n ? std::sqrt(sq / static_cast<double>(n)) : 0;
  }
  return "[length " + std::to_string(s.length) + ", mean " + stat_list(mean) + ", std " +
         stat_list(stdev) + "]";
}

std::string attribute_words(const CurveAttributes& a, const std::vector<std::string>& tasks) {
  std::string words;
  for (const std::string& name : tasks) {
    if (name == "caption") continue;
    if (name == "period" && !a.periodic) continue;
    if (name == "spike_position" && a.spike_positions.empty()) continue;
    words += (words.empty() ? "" : " ") + task_answer(task_spec(name), a);
  }
  return words;
}

std::string warmup_text(const TemporalSample& sample, const std::string& description) {
  const std::string placeholder = kSeriesPlaceholder;
  std::string text;
  size_t from = 0, k = 0;
  for (size_t at = sample.input.find(placeholder); at != std::string::npos;
       at = sample.input.find(placeholder, from), ++k) {
    text += sample.input.substr(from, at - from);
    if (k < sample.series.size()) text += series_stats_text(sample.series[k]) + " " + description;
    from = at + placeholder.size();
  }
  return text + sample.input.substr(from) + sample.output;
}

}  // namespace lmtrain::data::temporal
