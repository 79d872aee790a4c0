// The KIVI-quantised KV cache (quantized_kv_store.h): every token kept, each layer in a
// QuantizedKvStore. Positions are absolute, as in the full cache, and keys are rotated before
// quantisation, so block_size bounds the sequence. Holds left-padded batches: pad slots are
// stored as zeros, so that their (masked, arbitrary) values do not widen the per-channel key
// ranges of the groups they share with real tokens. A layer bounded by its window
// (KvCache::window_keep) drops the tokens before its last W - 1 after quantising, cutting
// groups without requantising them, so it holds the codes the unbounded cache would; the
// quantisation is the same as without the bound while W - 1 >= R + G - 1 (the residual and
// the group being filled are never cut).
#pragma once
#include <vector>

#include "infer/quantized_kv_store.h"
#include "model/kv_cache.h"

namespace lmtrain::infer {

class QuantizedKvCache : public model::KvCache {
 public:
  QuantizedKvCache(int64_t layers, int64_t max_len, model::RopeSpec rope, QuantizedKvOptions o);
  int64_t next_position() const override { return length_; }
  int64_t room() const override { return max_len_ - length_; }
  std::pair<at::Tensor, at::Tensor> update(int64_t layer, const at::Tensor& k,
                                           const at::Tensor& v) override;
  // How the attention reads the quantised groups: from the codes (quantized_attention.h:
  // a fixed handful of ops per layer), or by dequantising every group and attending over the
  // result (several ops per group). kAuto reads the codes from batch x groups >= 16, where
  // that measured faster on CPU (README, "KV cache policies").
  enum class Read { kAuto, kCodes, kDequantised };
  void set_read(Read read) { read_ = read; }
  bool attends() const override;
  at::Tensor attend(int64_t layer, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                    int64_t window) override;
  void advance(int64_t t) override;
  int64_t held() const override { return length_; }
  int64_t bytes() const override;
  bool supports_padding() const override { return true; }

 private:
  std::vector<QuantizedKvStore> layers_;
  int64_t length_ = 0, max_len_;
  model::RopeSpec rope_;
  Read read_ = Read::kAuto;
  // Appends this call's keys (rotated; zero at pad slots) and values to the layer's store.
  QuantizedKvStore& append(int64_t layer, const at::Tensor& k, const at::Tensor& v);
};

}  // namespace lmtrain::infer
