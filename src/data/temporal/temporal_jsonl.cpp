#include "data/temporal/temporal_jsonl.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fs.h"
#include "core/json_strict.h"

namespace lmtrain::data::temporal {
namespace {

// The shortest text of `f` that a JSON reader's double, cast to float, turns back into `f`.
void append_float_json(std::string& out, float f) {
  if (f == 0.0f && std::signbit(f)) {
    out += "-0.0";  // "-0" would read back as the integer 0
    return;
  }
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), f);
  double back = 0;
  std::from_chars(buf, r.ptr, back);
  if (static_cast<float>(back) != f)
    r = std::to_chars(buf, buf + sizeof(buf), static_cast<double>(f));
  out.append(buf, r.ptr);
}

void append_series_json(std::string& out, const SeriesValues& s) {
  const auto channel = [&](int64_t c) {
    out += '[';
    for (int64_t t = 0; t < s.length; ++t) {
      const size_t i = static_cast<size_t>(c * s.length + t);
      if (t) out += ',';
      if (s.valid.empty() || s.valid[i]) {
        append_float_json(out, s.values[i]);
      } else {
        out += "null";
      }
    }
    out += ']';
  };
  if (s.channels == 1) {
    channel(0);
    return;
  }
  out += '[';
  for (int64_t c = 0; c < s.channels; ++c) {
    if (c) out += ',';
    channel(c);
  }
  out += ']';
}

// One list of values (a channel) into `s` at channel `c`.
void read_channel_json(const nlohmann::json& list, SeriesValues& s, int64_t c,
                       const std::string& where) {
  for (int64_t t = 0; t < s.length; ++t) {
    const auto& v = list[static_cast<size_t>(t)];
    const size_t i = static_cast<size_t>(c * s.length + t);
    if (v.is_null()) continue;  // missing: value 0, valid 0
    if (!v.is_number()) {
      throw Error(where + " value " + std::to_string(t) + ": " + v.type_name() +
                  " is not a number (a missing value is null)");
    }
    s.values[i] = checked_series_value(v.get<double>(), where + " value " + std::to_string(t));
    s.valid[i] = 1;
  }
}

SeriesValues series_from_json(const nlohmann::json& e, const std::string& where) {
  if (!e.is_array()) {
    throw Error(where + ": a series must be a list of values or of channels, not " +
                std::string(e.type_name()));
  }
  if (e.empty()) throw Error(where + ": the series is empty");
  SeriesValues s;
  const bool multichannel = e[0].is_array();
  s.channels = multichannel ? static_cast<int64_t>(e.size()) : 1;
  s.length = multichannel ? static_cast<int64_t>(e[0].size()) : static_cast<int64_t>(e.size());
  if (s.length == 0) throw Error(where + " channel 0: the series is empty");
  if (multichannel) {
    for (size_t c = 0; c < e.size(); ++c) {
      if (!e[c].is_array()) {
        throw Error(where + " channel " + std::to_string(c) +
                    ": not a list of values (channel 0 is one)");
      }
      if (static_cast<int64_t>(e[c].size()) != s.length) {
        throw Error(where + " channel " + std::to_string(c) + ": " + std::to_string(e[c].size()) +
                    " values where channel 0 has " + std::to_string(s.length) +
                    " (ragged channels)");
      }
    }
  }
  s.values.assign(static_cast<size_t>(s.channels * s.length), 0.0f);
  s.valid.assign(s.values.size(), 0);
  for (int64_t c = 0; c < s.channels; ++c) {
    const std::string at = multichannel ? where + " channel " + std::to_string(c) : where;
    read_channel_json(multichannel ? e[static_cast<size_t>(c)] : e, s, c, at);
  }
  return s;
}

// "timeseries": [v0, v1, ...], values (numbers or nulls) rather than series: one univariate
// series, which is what such a line means. A list mixing values and lists has no one reading:
// refused, saying which shapes are read.
bool is_flat_series(const nlohmann::json& ts, const std::string& where) {
  const auto is_list = [](const nlohmann::json& e) { return e.is_array(); };
  const size_t lists = static_cast<size_t>(std::count_if(ts.begin(), ts.end(), is_list));
  if (lists == 0) return !ts.empty();
  if (lists != ts.size()) {
    throw Error(where +
                ": \"timeseries\" mixes values and lists: give one series as a list of "
                "values [v0, v1, ...], or several as a list of series [[v0, ...], [v0, "
                "...]] (a multichannel series: a list of equal-length channels)");
  }
  return false;
}

const nlohmann::json* temporal_field(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::string string_field(const nlohmann::json& j, const char* key, const std::string& where,
                         bool required) {
  const nlohmann::json* v = temporal_field(j, key);
  if (!v) {
    if (required) throw Error(where + ": no \"" + key + "\" (a string) in the sample");
    return "";
  }
  if (!v->is_string()) {
    throw Error(where + ": \"" + key + "\" must be a string, not " + v->type_name());
  }
  return v->get<std::string>();
}

}  // namespace

int64_t count_placeholders(const std::string& text) {
  int64_t n = 0;
  const size_t len = std::strlen(kSeriesPlaceholder);
  for (size_t p = text.find(kSeriesPlaceholder); p != std::string::npos;
       p = text.find(kSeriesPlaceholder, p + len)) {
    ++n;
  }
  return n;
}

std::string sample_to_jsonl(const TemporalSample& s) {
  using nlohmann::json;
  std::string out = "{\"input\":" + json(s.input).dump() + ",\"output\":" + json(s.output).dump() +
                    ",\"timeseries\":[";
  for (size_t k = 0; k < s.series.size(); ++k) {
    if (k) out += ',';
    append_series_json(out, s.series[k]);
  }
  out += ']';
  // The scoring fields whenever any is set (a line read from a file may have some without a
  // task), so whatever was read is written back.
  if (!s.task.empty() || !s.choices.empty() || !s.answer.empty() || !std::isnan(s.numeric_answer)) {
    out += ",\"task\":" + json(s.task).dump() + ",\"choices\":" + json(s.choices).dump() +
           ",\"answer\":" + json(s.answer).dump() + ",\"numeric_answer\":" +
           (std::isfinite(s.numeric_answer) ? json(s.numeric_answer).dump() : "null");
  }
  if (!s.attributes_json.empty()) out += ",\"attributes\":" + s.attributes_json;
  return out + "}";
}

TemporalSample sample_from_json(const nlohmann::json& j, const std::string& where,
                                const ReadOptions& options, JsonlFields fields) {
  if (!j.is_object()) {
    throw Error(where +
                ": a sample must be a JSON object {\"input\", \"output\", "
                "\"timeseries\"}, not " +
                std::string(j.type_name()));
  }
  TemporalSample s;
  const bool required = fields == JsonlFields::kSample;
  s.input = string_field(j, "input", where, required);
  s.output = string_field(j, "output", where, required);
  const nlohmann::json* ts = temporal_field(j, "timeseries");
  if (ts && !ts->is_array()) {
    throw Error(where + ": \"timeseries\" must be a list of series, not " +
                std::string(ts->type_name()));
  }
  const bool flat = ts && is_flat_series(*ts, where);
  const int64_t n_series = !ts ? 0 : flat ? 1 : static_cast<int64_t>(ts->size());
  if (temporal_field(j, "input") && count_placeholders(s.input) != n_series) {
    throw Error(where + ": the input has " + std::to_string(count_placeholders(s.input)) +
                " placeholder(s) " + kSeriesPlaceholder + " but \"timeseries\" holds " +
                std::to_string(n_series) + " series (one per placeholder" +
                (flat ? "; a flat list of values is one series)" : ")"));
  }
  for (int64_t k = 0; k < n_series; ++k) {
    const std::string at = where + ": timeseries" + (flat ? "" : "[" + std::to_string(k) + "]");
    s.series.push_back(series_from_json(flat ? *ts : (*ts)[static_cast<size_t>(k)], at));
    check_series(s.series.back(), at, options);
  }
  s.task = string_field(j, "task", where, false);
  s.answer = string_field(j, "answer", where, false);
  if (const nlohmann::json* c = temporal_field(j, "choices")) {
    if (!c->is_array()) throw Error(where + ": \"choices\" must be a list of strings");
    for (const auto& e : *c) {
      if (!e.is_string()) throw Error(where + ": \"choices\" must be a list of strings");
      s.choices.push_back(e.get<std::string>());
    }
  }
  if (const nlohmann::json* n = temporal_field(j, "numeric_answer")) {
    if (!n->is_null() && !n->is_number()) {
      throw Error(where + ": \"numeric_answer\" must be a number or null");
    }
    if (n->is_number()) s.numeric_answer = n->get<double>();
  }
  if (const nlohmann::json* a = temporal_field(j, "attributes")) {
    if (!a->is_object()) throw Error(where + ": \"attributes\" must be an object");
    s.attributes_json = a->dump();
  }
  return s;
}

TemporalSample sample_from_jsonl(const std::string& line, const std::string& where,
                                 const ReadOptions& options, JsonlFields fields) {
  return sample_from_json(core::parse_json_strict(line, where), where, options, fields);
}

std::vector<NumberedSample> read_numbered_temporal_jsonl(const std::string& path,
                                                         const ReadOptions& options,
                                                         JsonlFields fields) {
  const std::string text = core::read_file(path);
  std::vector<NumberedSample> out;
  int64_t line_no = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    ++line_no;
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    out.push_back(
        {line_no, sample_from_jsonl(line, path + ":" + std::to_string(line_no), options, fields)});
  }
  if (out.empty()) throw Error(path + ": no samples (an empty JSONL file)");
  return out;
}

std::vector<TemporalSample> read_temporal_jsonl(const std::string& path, const ReadOptions& options,
                                                JsonlFields fields) {
  std::vector<TemporalSample> out;
  for (auto& n : read_numbered_temporal_jsonl(path, options, fields)) {
    out.push_back(std::move(n.sample));
  }
  return out;
}

}  // namespace lmtrain::data::temporal
