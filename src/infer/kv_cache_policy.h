// --kv_cache=POLICY for generate and eval: parses the policy text and builds its cache.
//   full                              the exact cache (model/full_kv_cache.h)
//   int8 | int4 [:group=G,residual=R] KIVI-style quantised keys/values (quantized_kv_store.h)
//   streaming:sinks=S,window=W        StreamingLLM sinks + recent window (streaming_kv_cache.h)
//   h2o:budget=B,recent=R             Heavy-Hitter Oracle (h2o_kv_cache.h)
// A policy has two independent parts: a *selection* (which tokens are kept: all, streaming,
// h2o) and a *storage* (how they are held: dense, int8, int4). SELECTION+STORAGE composes them,
// e.g. streaming:sinks=4,window=252+int8:group=32. Combinations that mean nothing (full with
// anything, int8+int4, streaming+h2o, a part given twice) and h2o+int8/int4 (h2o keeps a
// different set per head, which would split KIVI's per-channel key groups unevenly) are
// UsageErrors, like unknown policies, parameters and values; each names the text.
// Every part also takes window_bound=0|1 (default 1): with 1, a layer with a sliding window
// (model.windows) keeps only the last W - 1 tokens it can still read (KvCache::window_keep);
// 0 keeps what the policy alone keeps (for comparing, e.g. full:window_bound=0).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "infer/quantized_kv_store.h"
#include "model/gpt.h"

namespace lmtrain::infer {

struct KvPolicy {
  enum class Select { kAll, kStreaming, kH2o };
  Select select = Select::kAll;
  std::optional<QuantizedKvOptions> quant;  // storage: KIVI-quantised; nullopt: dense, exact
  int64_t sinks = 4, window = 0;            // streaming
  int64_t budget = 0, recent = 0;           // h2o
  bool window_bound = true;                 // bound windowed layers' caches to their window
  std::string text = "full";
  // The exact cache.
  bool full() const { return select == Select::kAll && !quant; }
  // Whether the cache keeps positions absolute, so block_size bounds generation (streaming
  // forgets tokens and is not bounded).
  bool bounded() const { return select != Select::kStreaming; }
  // Whether a batch may hold prompts of different lengths (left padding; see model/kv_cache.h).
  bool supports_padding() const { return select == Select::kAll; }
};

KvPolicy parse_kv_policy(const std::string& text);

// A cache of this policy for `model`, `batch` sequences of up to max_len tokens (bounded
// policies). Throws UsageError when the policy does not fit the model (e.g. S + W >= block_size).
std::unique_ptr<model::KvCache> make_kv_cache(const KvPolicy& policy, const model::GptImpl& model,
                                              int64_t batch, int64_t max_len);

}  // namespace lmtrain::infer
