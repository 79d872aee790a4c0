// KIVI-style quantised KV cache (Liu et al., 2024): keys quantised per channel (one scale and
// zero per channel over each group of G tokens: key outliers live in fixed channels), values
// per token (one scale and zero per token over each group of G channels), asymmetric min-max to
// `bits` (8, or 4 packed two per byte). The most recent tokens stay in full precision: once R + G
// are held unquantised, the oldest G are quantised as one group. Reads dequantise every group
// and append the full-precision residual (not fused into the attention kernel).
//
// Positions are absolute, as in the full cache; keys are rotated before quantisation.
#pragma once
#include <vector>

#include "model/kv_cache.h"

namespace lmtrain::infer {

struct QuantizedKvOptions {
  int bits = 8;           // 8 or 4
  int64_t group = 32;     // G: tokens per key group, channels per value group
  int64_t residual = 32;  // R: most recent tokens kept in full precision
};

// Asymmetric min-max quantisation along `dim` in groups: x (..., n, ...) with n divisible by
// the group when grouped along dim. Returns codes (uint8, 4-bit codes packed in pairs along the
// last dim when bits == 4) and the fp16 scale and zero (min) of each group.
struct Quantized {
  at::Tensor codes, scale, zero;
  int bits = 8;
};
Quantized quantize(const at::Tensor& x, int bits, int64_t reduce_dim);
// Inverse of quantize (dtype: the result's); scale and zero broadcast along the reduced dim.
at::Tensor dequantize(const Quantized& q, at::ScalarType dtype);

class QuantizedKvCache : public model::KvCache {
 public:
  QuantizedKvCache(int64_t layers, int64_t max_len, model::RopeSpec rope, QuantizedKvOptions o);
  int64_t next_position() const override { return length_; }
  int64_t room() const override { return max_len_ - length_; }
  std::pair<at::Tensor, at::Tensor> update(int64_t layer, const at::Tensor& k,
                                           const at::Tensor& v) override;
  void advance(int64_t t) override;
  int64_t held() const override { return length_; }
  int64_t bytes() const override;

 private:
  struct Layer {
    std::vector<Quantized> k_groups, v_groups;  // per G tokens: keys (B,K,G,D), values likewise
    at::Tensor k_res, v_res;                    // (B, K, r, D) full precision, rotated keys
  };
  std::vector<Layer> layers_;
  int64_t length_ = 0, max_len_;
  model::RopeSpec rope_;
  QuantizedKvOptions opts_;
};

}  // namespace lmtrain::infer
