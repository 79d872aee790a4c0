// --kv_cache=POLICY for generate and eval: parses the policy text and builds its cache.
//   full                              the exact cache (model/full_kv_cache.h)
//   int8 | int4 [:group=G,residual=R] KIVI-style quantised keys/values (quantized_kv_cache.h)
//   streaming:sinks=S,window=W        StreamingLLM sinks + recent window (streaming_kv_cache.h)
//   h2o:budget=B,recent=R             Heavy-Hitter Oracle (h2o_kv_cache.h)
// Unknown policies, parameters and values are UsageErrors naming them.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "infer/quantized_kv_cache.h"
#include "model/gpt.h"

namespace lmtrain::infer {

struct KvPolicy {
  enum class Kind { kFull, kQuantized, kStreaming, kH2o };
  Kind kind = Kind::kFull;
  QuantizedKvOptions quant;
  int64_t sinks = 4, window = 0;
  int64_t budget = 0, recent = 0;  // h2o
  std::string text = "full";
  // Whether the cache forgets tokens (generation is then not bounded by block_size).
  bool bounded() const { return kind != Kind::kStreaming; }
};

KvPolicy parse_kv_policy(const std::string& text);

// A cache of this policy for `model`, `batch` sequences of up to max_len tokens (bounded
// policies). Throws UsageError when the policy does not fit the model (e.g. S + W >= block_size).
std::unique_ptr<model::KvCache> make_kv_cache(const KvPolicy& policy, const model::GptImpl& model,
                                              int64_t batch, int64_t max_len);

}  // namespace lmtrain::infer
