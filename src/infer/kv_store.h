// How a KV cache stores the tokens of one layer, apart from which tokens it keeps: the
// selection policies (keep everything, StreamingLLM's sinks + window) append each call's keys
// and values, read all of them back for the attention, and drop the ones they evict; the store
// decides the representation (dense_kv_store.h: as given; quantized_kv_store.h: KIVI int8/int4).
// That split is what lets --kv_cache compose a selection with a storage (streaming:...+int8).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

namespace lmtrain::infer {

// Token indices [begin, end) of a store.
struct TokenRange {
  int64_t begin = 0, end = 0;
};

class KvStore {
 public:
  virtual ~KvStore() = default;
  // k, v: (B, K, T, D), appended after the held tokens.
  virtual void append(const at::Tensor& k, const at::Tensor& v) = 0;
  // Every held token in order, (B, K, L, D) each, in `dtype`.
  virtual std::pair<at::Tensor, at::Tensor> read(at::ScalarType dtype) const = 0;
  // Keep only the tokens in `ranges` (sorted, disjoint), in order; the rest are dropped.
  virtual void keep(const std::vector<TokenRange>& ranges) = 0;
  // Called once all of a step's tokens are in (and evictions done): a store may compress here.
  virtual void settle() {}
  // Tokens held.
  virtual int64_t size() const = 0;
  // Bytes of storage held.
  virtual int64_t bytes() const = 0;
};

using KvStoreFactory = std::function<std::unique_ptr<KvStore>()>;

}  // namespace lmtrain::infer
