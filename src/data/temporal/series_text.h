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

// The curve's class attributes as words, in the order of `tasks` (numeric tasks and the caption
// left out): e.g. "increasing not periodic one" for trend, seasonality, spikes.
std::string curve_words(const CurveAttributes& attributes, const std::vector<std::string>& tasks);

// A sample as plain text for the LM's warm-up (`temporal-data --lm_text`): its prompt with, at
// each placeholder, the series' statistics and its curve_words, then its answer. An LM trained on
// it learns to answer each question from what stands at the series' place; the encoder is then
// aligned to write that as soft tokens (a CPU stand-in for an LM that reads descriptions).
std::string warmup_text(const TemporalSample& sample, const CurveAttributes& attributes,
                        const std::vector<std::string>& tasks);

}  // namespace lmtrain::data::temporal
