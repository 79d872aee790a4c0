// Attention read straight from KIVI-quantised storage (quantized_kv_store.h), without forming
// the dequantised keys and values. With a key group's per-channel scale s and zero z, and the
// codes c of its tokens,
//   q . k_t = q . (s * c_t + z) = (q * s) . c_t + q . z          (one scaled query per group)
// and with a value's per-token scale and zero (per group of channels j),
//   sum_t w_t v_t[j] = sum_t (w_t s_t[j]) c_t[j] + sum_t w_t z_t[j]
// so each group costs a scaled copy of the few queries instead of an elementwise pass over all
// of its keys and values, and every group is handled by the same few batched ops (the groups
// are stacked) instead of a dequantise-and-concatenate per group per step.
#pragma once
#include <ATen/core/Tensor.h>

namespace lmtrain::infer {

// The quantised groups of one layer, stacked: n groups of G tokens, K kv heads, head_dim D.
struct StackedGroups {
  at::Tensor key_codes;    // (B, K, n, G, D) uint8, unpacked
  at::Tensor key_scale;    // (B, K, n, 1, D) float
  at::Tensor key_zero;     // (B, K, n, 1, D) float
  at::Tensor value_codes;  // (B, K, n, G, J, c) uint8, unpacked (J = D / c channel groups)
  at::Tensor value_scale;  // (B, K, n, G, J, 1) float
  at::Tensor value_zero;   // (B, K, n, G, J, 1) float
};

// Causal attention of q (B, H, T, D) (H = K * rep; the T queries are the newest T tokens, the
// last T of `residual_k`) over the stacked groups followed by the full-precision residual
// residual_k, residual_v (B, K, r, D). key_bias: (B, 1, 1, n G + r) additive, or undefined.
// Returns (B, H, T, D) in q's dtype; computes in fp32.
at::Tensor quantized_attention(const at::Tensor& q, const StackedGroups& groups,
                               const at::Tensor& residual_k, const at::Tensor& residual_v,
                               const at::Tensor& key_bias);

}  // namespace lmtrain::infer
