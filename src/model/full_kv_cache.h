// The exact KV cache: every key (rotated once, at its absolute position) and value of every
// layer in preallocated (B, K, max_len, D) buffers. The reference the other policies are
// measured against.
#pragma once
#include <vector>

#include "model/kv_cache.h"

namespace lmtrain::model {

class FullKvCache : public KvCache {
 public:
  FullKvCache(int64_t layers, int64_t batch, int64_t kv_heads, int64_t max_len, int64_t head_dim,
              const at::TensorOptions& options, RopeSpec rope);
  int64_t next_position() const override { return length_; }
  int64_t room() const override { return max_len_ - length_; }
  std::pair<at::Tensor, at::Tensor> update(int64_t layer, const at::Tensor& k,
                                           const at::Tensor& v) override;
  void advance(int64_t t) override { length_ += t; }
  int64_t held() const override { return length_; }
  int64_t bytes() const override;
  bool supports_padding() const override { return true; }

 private:
  std::vector<at::Tensor> k_, v_;  // per layer (B, K, max_len, D)
  int64_t length_ = 0, max_len_;
  RopeSpec rope_;
};

}  // namespace lmtrain::model
