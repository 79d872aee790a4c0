#include "report/run_metrics.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/regular_file.h"

namespace lmtrain::report {
namespace {

// Drops the points at or after `step` (a resumed session logs them again).
void truncate_series_from(Series& s, double step) {
  const auto it = std::lower_bound(s.step.begin(), s.step.end(), step);
  const auto keep = static_cast<size_t>(it - s.step.begin());
  s.step.resize(keep);
  s.value.resize(keep);
}

void truncate_all_from(RunMetrics& m, double step) {
  for (auto& [name, s] : m.scalars) truncate_series_from(s, step);
  for (auto& [name, layers] : m.per_layer) {
    for (auto& [layer, s] : layers) truncate_series_from(s, step);
  }
}

void push_point(Series& s, double step, double value) {
  s.step.push_back(step);
  s.value.push_back(value);
}

// The record's values as (name, value) and (name, layer, value), flattened as run_metrics.h
// says. Keys are checked only for being numbers: any name is a metric.
struct FlatRecord {
  std::vector<std::pair<std::string, double>> scalars;
  struct LayerValue {
    std::string name;
    int64_t layer;
    double value;
  };
  std::vector<LayerValue> layered;
};

void flatten_metrics_json(const nlohmann::json& obj, const std::string& prefix, FlatRecord& out) {
  for (const auto& [key, v] : obj.items()) {
    if (prefix.empty() && key == "step") continue;
    const std::string name = prefix + key;
    if (v.is_number()) {
      const double x = v.get<double>();
      if (std::isfinite(x)) out.scalars.emplace_back(name, x);
    } else if (v.is_object()) {
      flatten_metrics_json(v, name + "/", out);
    } else if (v.is_array()) {
      for (const auto& e : v) {
        if (!e.is_object() || !e.contains("layer") || !e["layer"].is_number_integer()) continue;
        const auto layer = e["layer"].get<int64_t>();
        for (const auto& [field, x] : e.items()) {
          if (field == "layer" || !x.is_number()) continue;
          const double value = x.get<double>();
          if (std::isfinite(value)) out.layered.push_back({name + "/" + field, layer, value});
        }
      }
    }
  }
}

std::string clip_for_message(std::string_view line) {
  std::string s(line.substr(0, 80));
  if (line.size() > 80) s += "...";
  return s;
}

}  // namespace

void MetricsReader::add_line(std::string_view line, int64_t line_no, RunMetrics& m,
                             double& last_elapsed, double& max_step) const {
  const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  const std::string where = path_ + ":" + std::to_string(line_no);
  if (j.is_discarded() || !j.is_object()) {
    throw Error(where + ": not a JSON object (" + clip_for_message(line) +
                "): the file is damaged there; fix or delete that line");
  }
  if (!j.contains("step") || !j["step"].is_number_integer() || j["step"].get<int64_t>() < 0) {
    throw Error(where + ": the record has no integer \"step\" >= 0 (" + clip_for_message(line) +
                ")");
  }
  const double step = static_cast<double>(j["step"].get<int64_t>());
  FlatRecord rec;
  flatten_metrics_json(j, "", rec);

  // A step logged again: a resumed session. Everything from it on is the new session's.
  bool restart = step < max_step;
  for (const auto& [name, value] : rec.scalars) {
    const auto it = m.scalars.find(name);
    if (it != m.scalars.end() && !it->second.empty() && it->second.step.back() >= step) {
      restart = true;
    }
  }
  if (restart) truncate_all_from(m, step);
  max_step = restart ? step : std::max(max_step, step);

  for (const auto& [name, value] : rec.scalars) {
    if (name == "elapsed_s") {
      // elapsed_s starts again at 0 in each session: close the previous one.
      if (last_elapsed >= 0 && value < last_elapsed) {
        m.train_seconds += last_elapsed;
        ++m.sessions;
      }
      if (m.sessions == 0) m.sessions = 1;
      last_elapsed = value;
    }
    auto [it, added] = m.scalars.try_emplace(name);
    if (added && expected_records_ > 0) {
      // Growing by doubling would leave the freed halves of a million-point series behind.
      it->second.step.reserve(expected_records_);
      it->second.value.reserve(expected_records_);
    }
    push_point(it->second, step, value);
  }
  for (const auto& l : rec.layered) push_point(m.per_layer[l.name][l.layer], step, l.value);
  ++m.records;
}

void MetricsReader::feed(std::string_view text) {
  bytes_fed_ += text.size();
  size_t start = 0;
  while (start < text.size()) {
    const size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) {
      tail_.append(text.substr(start));
      break;
    }
    std::string line = std::move(tail_);
    tail_.clear();
    line.append(text.substr(start, nl - start));
    start = nl + 1;
    ++lines_;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (!bad_line_.empty()) {
      // The bad line was not the last one: the file is damaged in the middle.
      throw Error(path_ + ":" + std::to_string(bad_line_no_) + ": " + bad_what_);
    }
    try {
      add_line(line, lines_, metrics_, last_elapsed_, max_step_);
    } catch (const Error& e) {
      // Fatal unless no other line follows (finish() then skips it with a note).
      bad_line_ = line;
      bad_line_no_ = lines_;
      std::string what = e.what();
      const std::string prefix = path_ + ":" + std::to_string(lines_) + ": ";
      if (what.rfind(prefix, 0) == 0) what = what.substr(prefix.size());
      bad_what_ = what;
    }
  }
}

RunMetrics MetricsReader::finish() const& {
  RunMetrics m = metrics_;
  finish_into(m);
  return m;
}

RunMetrics MetricsReader::finish() && {
  RunMetrics m = std::move(metrics_);
  finish_into(m);
  return m;
}

void MetricsReader::finish_into(RunMetrics& m) const {
  double last_elapsed = last_elapsed_, max_step = max_step_;
  const bool tail_blank = tail_.find_first_not_of(" \t\r") == std::string::npos;
  if (!bad_line_.empty()) {
    if (!tail_blank) throw Error(path_ + ":" + std::to_string(bad_line_no_) + ": " + bad_what_);
    m.notes.push_back(path_ + ": the last line (" + std::to_string(bad_line_no_) +
                      ") is incomplete or damaged, as a run killed while writing it leaves it: "
                      "skipped (" +
                      clip_for_message(bad_line_) + ")");
  } else if (!tail_blank) {
    // Parsed into a scratch copy of the records' effect: a cut-off line must change nothing.
    RunMetrics with_tail = m;
    try {
      add_line(tail_, lines_ + 1, with_tail, last_elapsed, max_step);
      m = std::move(with_tail);
    } catch (const Error&) {
      last_elapsed = last_elapsed_;
      m.notes.push_back(path_ + ": the last line (" + std::to_string(lines_ + 1) +
                        ") is cut off, as a run killed while writing it leaves it: skipped (" +
                        clip_for_message(tail_) + ")");
    }
  }
  if (last_elapsed >= 0) m.train_seconds += last_elapsed;
}

RunMetrics parse_metrics(std::string_view text, const std::string& path) {
  MetricsReader reader(path);
  reader.feed(text);
  return std::move(reader).finish();
}

RunMetrics read_metrics_file(const std::string& path, uint64_t max_bytes) {
  // A regular file only, up to its size when opened (core/regular_file.h): a FIFO or a link
  // to /dev/zero in its place is refused, not read for ever.
  const core::RegularFile file(path, max_bytes);
  MetricsReader reader(path);
  const uint64_t size = file.size();
  constexpr uint64_t kPiece = 4 << 20;
  for (uint64_t at = 0; at < size; at += kPiece) {
    const std::string chunk = file.read(at, kPiece);
    if (chunk.empty()) break;  // cut short since it was opened
    if (at == 0) {
      // Records to expect, from the first piece's lines per byte (a few percent over).
      const auto lines = std::count(chunk.begin(), chunk.end(), '\n');
      reader.expect_records(
          static_cast<size_t>(1.05 * static_cast<double>(size) * static_cast<double>(lines + 1) /
                              static_cast<double>(chunk.size())));
    }
    reader.feed(chunk);
  }
  return std::move(reader).finish();
}

}  // namespace lmtrain::report
