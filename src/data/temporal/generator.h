// The deterministic synthetic generator of time-series QA samples (issue 26): what
// `lmtrain temporal-data` caches and what online training generates, equal byte for byte.
//
// Sample `index` is a pure function of (seed, index, lengths, channels, tasks): its randomness
// is a counter-based stream (counter_rng.h) seeded from (seed, index), so it does not depend on
// threads or on which samples were made before it. It asks about one attribute, its task:
//   task  = tasks[index % tasks.size()]
//   class = (index / tasks.size()) % (that task's number of classes)
// so every contiguous block of tasks.size() * 6 samples holds each class of each class task
// equally often (6 = lcm of 2 and 3 classes): a held-out tail is class-balanced and chance
// accuracy is 1 / K. The other attributes are drawn at random.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/temporal/curve_attributes.h"
#include "data/temporal/temporal_sample.h"

namespace lmtrain::data::temporal {

// Bumped whenever a sample for the same options changes; recorded in temporal_data.json.
inline constexpr int64_t kGeneratorVersion = 1;

struct GeneratorOptions {
  uint64_t seed = 0;
  std::vector<int64_t> lengths = {256};  // each sample's length is one of these, drawn per sample
  int64_t channels = 1;                  // channels of every series (the same attributes in each)
  std::vector<std::string> tasks;        // the tasks cycled through; empty = temporal_tasks()
};

// Every task name, in the generator's order: trend, seasonality, noise, spikes, level_shift
// (class tasks), period, spike_position (numeric: an integer answer), caption.
std::vector<std::string> temporal_tasks();

// UsageError naming the option for lengths outside [32, 2^20], channels outside [1, 64], an
// empty length list, or an unknown task name.
void check_generator_options(const GeneratorOptions& o);

struct GeneratedCurve {
  CurveAttributes attributes;
  TemporalSample sample;
};

// Sample `index` (>= 0) with the attributes it was built from. One series per sample (C
// channels); input = kSeriesPlaceholder + "\n" + question + options + "\nAnswer:", output = " " +
// answer; attributes_json adds "version", "seed", "index" and "task" to attributes_to_json.
GeneratedCurve generate_curve(const GeneratorOptions& o, int64_t index);
inline TemporalSample generate_sample(const GeneratorOptions& o, int64_t index) {
  return generate_curve(o, index).sample;
}

// The canonical answer a generated text gives: the choice of `s` (case-insensitive, after
// leading white space) that the text starts with, followed by the end or a character that is
// not a letter or digit; for numeric tasks the number it starts with, as written by
// format_number ("24"); "" when it gives none (and always for a caption).
std::string parse_answer(const TemporalSample& s, const std::string& generated_text);

// The number a text starts with (after white space): [+-]digits[.digits][e[+-]digits]; nullopt
// when it starts with anything else. "inf" and "nan" are not numbers here.
std::optional<double> parse_number(const std::string& text);

// A number as the answers write it: an integer without a decimal point when it is one.
std::string format_number(double v);

}  // namespace lmtrain::data::temporal
