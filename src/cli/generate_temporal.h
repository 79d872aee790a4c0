// `lmtrain generate --series FILE` (issue 26): answers about time series with a temporal-encoder
// run's checkpoint. The series (CSV: one per column, NPY: one per row, JSONL: every line's)
// go through the run's trained encoder; its soft tokens stand at the prompt's placeholders
// ("<ts>" or "<ts><ts/>", one per series, in order) and the frozen LM decodes the answer with
// the usual sampling options and KV cache (infer/generator.h, soft tokens in the prefill).
// A JSONL file whose lines carry their own prompts ("input") is one prompt per line instead.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "core/runtime.h"
#include "infer/kv_cache_policy.h"
#include "infer/sampler.h"

namespace lmtrain::cli {

// Whether the checkpoint `spec` names (a checkpoint dir, a link, a run dir) is a temporal-encoder
// run's (model.temporal.enabled in its meta.json), read without loading any tensor. Nullopt when
// its meta.json cannot be read: loading the checkpoint reports why.
std::optional<bool> is_temporal_checkpoint(const std::string& spec);

// "<ts>" not followed by "<ts/>" completed to the full placeholder "<ts><ts/>".
std::string normalize_series_placeholders(const std::string& prompt);

struct SeriesGenerateOptions {
  std::string checkpoint;             // --checkpoint
  std::string series_path;            // --series
  std::optional<std::string> prompt;  // --prompt
  int64_t max_new_tokens = 100;
  infer::SamplingOptions sampling;
  int64_t seed = 1337;
  int64_t num_samples = 1;
  bool stop_at_eot = true;
  bool print_ids = false;
  infer::KvPolicy policy;
};

// Loads the run (train/temporal_setup.h) and the series, and prints the answers: for one prompt
// as plain `generate` does (streamed, "--- sample k ---" between --num_samples); for a JSONL
// file whose lines carry prompts, one JSON object per line on stdout. UsageErrors name the
// file, the prompt and both counts when the placeholders do not match the series.
void generate_with_series(const SeriesGenerateOptions& options, const core::Runtime& rt);

}  // namespace lmtrain::cli
