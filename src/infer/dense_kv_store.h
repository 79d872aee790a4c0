// The store that keeps keys and values as given (the compute dtype), growing by concatenation.
#pragma once
#include "infer/kv_store.h"

namespace lmtrain::infer {

class DenseKvStore : public KvStore {
 public:
  void append(const at::Tensor& k, const at::Tensor& v) override;
  std::pair<at::Tensor, at::Tensor> read(at::ScalarType dtype) const override;
  void keep(const std::vector<TokenRange>& ranges) override;
  int64_t size() const override { return k_.defined() ? k_.size(2) : 0; }
  int64_t bytes() const override;

 private:
  at::Tensor k_, v_;  // (B, K, L, D)
};

// Keeps `ranges` of x along dim 2 (the token dim of (B, K, L, ...) tensors).
at::Tensor keep_token_ranges(const at::Tensor& x, const std::vector<TokenRange>& ranges);

}  // namespace lmtrain::infer
