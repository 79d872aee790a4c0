// Text generation from a trained checkpoint with a KV cache, one prompt or a batch of them.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "infer/kv_cache_policy.h"
#include "infer/sampler.h"
#include "model/gpt.h"

namespace lmtrain::infer {

// Why a sequence stopped: its end-of-text token, its max_new_tokens, the model's block_size
// (bounded caches only), or its caller gave up on it (`cancelled` below).
enum class StopReason { kEot, kLength, kContext, kCancelled };
const char* stop_reason_name(StopReason r);  // "eot", "length", "context", "cancelled"

struct Generated {
  std::vector<uint32_t> tokens;  // the new ids (the end-of-text token included when it stopped)
  StopReason stop = StopReason::kLength;
};

// Incremental decoding of a batch: the prompts (non-empty, any lengths) are left-padded to the
// longest and prefilled in one forward (see model/kv_cache.h for the padding), then every row
// decodes one token per step through one (B, 1) call until each has stopped: at eot_id (when
// >= 0) or after its max_new_tokens. A row that has stopped keeps decoding (its tokens are
// dropped) until the last one does: simpler than shrinking the cache, and decode steps are
// memory-bound, so a few idle rows cost little. Greedy results equal those of running each
// prompt alone (positions restart at 0 per row, pads are masked); sampled ones draw from one
// generator for the whole batch. Policies without padding support (streaming, h2o) need prompts
// of one length (UsageError otherwise). on_token(row, id) receives each kept new id. `soft`:
// soft tokens in the prompts (empty or one entry per prompt), placed in the prefill.
// `cancelled(row)`, asked before each step, stops a row whose caller has gone (a server's
// client that closed its connection); the batch ends early when every row has stopped.
// Soft tokens in the prompts (model/soft_tokens.h), e.g. a time-series encoder's: per prompt, a
// flag per token (1: a soft token stands there, the id only holds its place) and the embeddings
// of its flagged positions in order, (n_b, C) with n_b its flags' count (C: the model's width).
// Empty: none. Only prompts carry soft tokens; what is generated is ordinary ids.
struct PromptSoftTokens {
  std::vector<std::vector<uint8_t>> slots;  // one per prompt, as long as it
  std::vector<at::Tensor> values;           // one per prompt: (n_b, C)
  bool empty() const { return slots.empty(); }
};

struct BatchGeneration {
  std::vector<Generated> rows;   // one per prompt, in order
  int64_t peak_cache_bytes = 0;  // the most bytes the KV cache held at any step
};
BatchGeneration generate_batch(model::GptImpl& model,
                               const std::vector<std::vector<uint32_t>>& prompts,
                               const std::vector<int64_t>& max_new_tokens,
                               const SamplingOptions& opts, uint64_t seed, int64_t eot_id,
                               const KvPolicy& policy = KvPolicy(),
                               const std::function<void(size_t, uint32_t)>& on_token = {},
                               const PromptSoftTokens& soft = {},
                               const std::function<bool(size_t)>& cancelled = {});

// One prompt: stops after max_new_tokens or at the end-of-text token when eot_id >= 0.
// on_token receives each new id as it is produced (for streaming output). Returns the new ids.
// `policy`: the KV cache (default full, bounded by block_size; a streaming cache is not, and
// takes long prompts in chunks). `soft`: the prompt's soft tokens (empty or one entry).
std::vector<uint32_t> generate(model::GptImpl& model, const std::vector<uint32_t>& prompt,
                               int64_t max_new_tokens, const SamplingOptions& opts, uint64_t seed,
                               int64_t eot_id, const std::function<void(uint32_t)>& on_token = {},
                               const KvPolicy& policy = KvPolicy(),
                               const PromptSoftTokens& soft = {});

// Reference decoding without a cache: re-runs the full forward pass for every new token.
std::vector<uint32_t> generate_uncached(model::GptImpl& model, const std::vector<uint32_t>& prompt,
                                        int64_t max_new_tokens, const SamplingOptions& opts,
                                        uint64_t seed, int64_t eot_id);

}  // namespace lmtrain::infer
