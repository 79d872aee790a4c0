// Text generation from a trained checkpoint with a KV cache.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "infer/kv_cache_policy.h"
#include "infer/sampler.h"
#include "model/gpt.h"

namespace lmtrain::infer {

// Incremental decoding: prefill the prompt once, then one token per step through the cache.
// Stops after max_new_tokens or at the end-of-text token when stop_at_eot. on_token receives
// each new id as it is produced (for streaming output). Returns the new ids. `policy`: the KV
// cache (default full, bounded by block_size; a streaming cache is not, and takes long prompts
// in chunks).
std::vector<uint32_t> generate(model::GptImpl& model, const std::vector<uint32_t>& prompt,
                               int64_t max_new_tokens, const SamplingOptions& opts, uint64_t seed,
                               int64_t eot_id, const std::function<void(uint32_t)>& on_token = {},
                               const KvPolicy& policy = KvPolicy());

// Reference decoding without a cache: re-runs the full forward pass for every new token.
std::vector<uint32_t> generate_uncached(model::GptImpl& model, const std::vector<uint32_t>& prompt,
                                        int64_t max_new_tokens, const SamplingOptions& opts,
                                        uint64_t seed, int64_t eot_id);

}  // namespace lmtrain::infer
