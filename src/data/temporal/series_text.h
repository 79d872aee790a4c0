// Text about series: the statistics a prompt states beside each series, and the warm-up text an
// LM learns before an encoder is aligned to it.
#pragma once
#include <string>
#include <vector>

#include "data/temporal/temporal_sample.h"

namespace lmtrain::data::temporal {

// "[length L, mean m, std s]" (per channel for C > 1: "mean (a, b)"), over the valid values:
// the level and scale that per-series normalisation removes from what the encoder sees, so the
// prompt states them, as ChatTS does (population std, like model/temporal/series_norm.h).
std::string series_stats_text(const SeriesValues& series);

// A sample as plain text for an LM's warm-up (`temporal-data --lm_text`): its prompt with the
// series' statistics at each placeholder, then its answer. An LM trained on it knows the answer
// format and the class priors, not the curves: the CPU stand-in for the LM an encoder is aligned
// to.
std::string warmup_text(const TemporalSample& sample);

}  // namespace lmtrain::data::temporal
