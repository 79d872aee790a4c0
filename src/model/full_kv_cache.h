// The exact KV cache: every key (rotated once, at its absolute position) and value of every
// layer in preallocated (B, K, capacity, D) buffers. The reference the other policies are
// measured against. A layer bounded by its window (KvCache::window_keep) keeps only its last
// W - 1 tokens: its buffer holds max(2 W, W - 1 + T) slots for calls of T tokens and is
// reallocated, the kept tokens moved to its front, when a call does not fit behind them (once
// every W or so decoding steps), so decoding writes in place as the full layers do.
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
  void advance(int64_t t) override;
  int64_t held() const override { return length_; }
  // The held tokens' share of the buffers (a windowed layer holds at most W - 1).
  int64_t bytes() const override;
  bool supports_padding() const override { return true; }

 private:
  struct Layer {
    at::Tensor k, v;     // (B, K, capacity, D); slot s at index s - origin
    int64_t origin = 0;  // slot of index 0
    int64_t first = 0;   // first slot held (> 0 once a window dropped older ones)
  };
  std::vector<Layer> layers_;
  int64_t length_ = 0, max_len_, batch_, kv_heads_, head_dim_;
  at::TensorOptions options_;
  RopeSpec rope_;
  // Makes room in layer l's buffer for t more tokens after slot length_.
  void reserve(Layer& l, int64_t keep, int64_t t);
};

}  // namespace lmtrain::model
