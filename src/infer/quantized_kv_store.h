// KIVI-style quantised storage (Liu et al., 2024): keys quantised per channel (one scale and zero
// per channel over each group of G tokens: key outliers live in fixed channels), values per
// token (one scale and zero per token over each group of G channels), asymmetric min-max to
// `bits` (8, or 4 packed two per byte). The most recent tokens stay in full precision: once
// R + G are held unquantised, the oldest G are quantised as one group. read() dequantises every
// group and appends the full-precision residual; attend() instead reads the codes inside the
// attention (quantized_attention.h) without forming the dequantised keys and values.
//
// Dropping tokens (keep()) never requantises: a key group's scale and zero are per channel over
// its tokens and a value's are its own, so the codes of the tokens a group keeps stay valid with
// them; a group shrinks (a StreamingLLM window slides through it) and goes when empty.
#pragma once
#include <vector>

#include "infer/kv_store.h"

namespace lmtrain::infer {

struct QuantizedKvOptions {
  int bits = 8;           // 8 or 4
  int64_t group = 32;     // G: tokens per key group, channels per value group
  int64_t residual = 32;  // R: most recent tokens kept in full precision
};

// Throws UsageError (naming `what`) unless G splits head_dim into whole (for int4: even) groups.
void check_quantized_fits(const QuantizedKvOptions& o, int64_t head_dim, const std::string& what);

// Asymmetric min-max quantisation along `dim` in groups: x (..., n, ...) with n divisible by
// the group when grouped along dim. Returns codes (uint8, 4-bit codes packed in pairs along the
// last dim when bits == 4) and the fp16 scale and zero (min) of each group.
struct Quantized {
  at::Tensor codes, scale, zero;
  int bits = 8;
  int64_t bytes() const;
};
Quantized quantize(const at::Tensor& x, int bits, int64_t reduce_dim);
// Inverse of quantize (dtype: the result's); scale and zero broadcast along the reduced dim.
at::Tensor dequantize(const Quantized& q, at::ScalarType dtype);
// The codes one per byte (4-bit codes unpacked), as uint8.
at::Tensor unpacked_codes(const Quantized& q);

class QuantizedKvStore : public KvStore {
 public:
  explicit QuantizedKvStore(QuantizedKvOptions o) : opts_(o) {}
  void append(const at::Tensor& k, const at::Tensor& v) override;
  std::pair<at::Tensor, at::Tensor> read(at::ScalarType dtype) const override;
  // Causal attention of q (B, H, T, D) over the held tokens, whose newest T are the queries'
  // own, read from the codes (quantized_attention.h); key_bias (B, 1, 1, L) or undefined.
  // Needs groups of one size (no partly evicted group): the keep-everything cache's.
  at::Tensor attend(const at::Tensor& q, const at::Tensor& key_bias) const;
  void keep(const std::vector<TokenRange>& ranges) override;
  void settle() override;
  int64_t size() const override;
  int64_t groups() const { return static_cast<int64_t>(groups_.size()); }
  int64_t batch() const { return k_res_.defined() ? k_res_.size(0) : 0; }
  int64_t bytes() const override;

 private:
  struct Group {
    Quantized k;  // codes (B, K, g, D), scale/zero (B, K, 1, D): per channel
    Quantized v;  // codes (B, K, g, D/c, c), scale/zero (B, K, g, D/c, 1): per token
  };
  QuantizedKvOptions opts_;
  std::vector<Group> groups_;
  at::Tensor k_res_, v_res_;  // (B, K, r, D) full precision
};

}  // namespace lmtrain::infer
