// Text about series: the statistics a prompt states beside each series, and the warm-up text an
// LM learns before an encoder is aligned to it.
#pragma once
#include <string>
#include <vector>

#include "data/temporal/curve_attributes.h"
#include "data/temporal/temporal_sample.h"

namespace lmtrain::data::temporal {

// "[length L, mean m, std s]" (per channel for C > 1: "mean (a, b)"), over the valid values:
// the level and scale that per-series normalisation removes from what the encoder sees, so the
// prompt states them, as ChatTS does (population std, like model/temporal/series_norm.h).
std::string series_stats_text(const SeriesValues& series);

// The curve described in words, as a caption a pretrained LM reads in context: the canonical
// answer of each of `tasks` in order, separated by spaces ("increasing periodic one" for trend,
// seasonality, spikes). The caption task adds nothing (it repeats the others); a period is
// written only for a periodic curve, a spike position only when the curve has a spike.
std::string attribute_words(const CurveAttributes& a, const std::vector<std::string>& tasks);

// A sample as plain text for an LM's warm-up (`temporal-data --lm_text`): its prompt with the
// series' statistics and `description` (attribute_words) at each placeholder, then its answer:
//   "[length 64, mean 3.2, std 0.8] increasing periodic one\nWhat is the trend ...\nAnswer: ..."
// An LM trained on it knows the answer format and the class priors, and reads the answer from a
// description in context, as a pretrained LM reads a caption: the CPU stand-in for the frozen LM
// an encoder is aligned to, whose soft tokens then stand where the description stood. A tiny LM
// warmed on the questions alone never learns to read its context, and no encoder can steer it
// without adapters (README, "Time-series encoders").
std::string warmup_text(const TemporalSample& sample, const std::string& description);

}  // namespace lmtrain::data::temporal
