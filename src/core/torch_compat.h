// Every libtorch version difference lives here. The build needs 2.1+ (CMakeLists.txt); Debian's
// 1.13 is no longer supported, so what only it needed is gone.
#pragma once
#include <ATen/ATen.h>
#include <torch/version.h>

#define LMTRAIN_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||          \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace lmtrain::compat {

// Causal scaled-dot-product attention on (B, H, T, D) tensors -> (B, H, T, D): the fused kernel
// (flash / memory-efficient on CUDA, fused math on CPU).
inline at::Tensor fused_causal_sdpa(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    double dropout_p) {
  return at::scaled_dot_product_attention(q, k, v, {}, dropout_p, /*is_causal=*/true);
}

// The same with fewer key/value heads than query heads (grouped-query attention: k, v
// (B, K, T, D), query head h reads kv head h / (H / K)). libtorch 2.5+ lets the kernel read the
// shared heads in place (enable_gqa); before, they are repeated to H heads first.
inline at::Tensor fused_causal_sdpa_grouped(const at::Tensor& q, const at::Tensor& k,
                                            const at::Tensor& v, double dropout_p) {
#if LMTRAIN_TORCH_AT_LEAST(2, 5)
  return at::scaled_dot_product_attention(q, k, v, {}, dropout_p, /*is_causal=*/true,
                                          /*scale=*/std::nullopt, /*enable_gqa=*/true);
#else
  const int64_t groups = q.size(1) / k.size(1);
  return fused_causal_sdpa(q, k.repeat_interleave(groups, 1), v.repeat_interleave(groups, 1),
                           dropout_p);
#endif
}

// Attention with an additive mask broadcastable to (B, H, Tq, Tk) (a sliding window, pad slots)
// and no dropout; k and v may have fewer heads than q (grouped-query attention).
inline at::Tensor masked_sdpa(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              const at::Tensor& mask) {
  const int64_t groups = q.size(1) / k.size(1);
#if LMTRAIN_TORCH_AT_LEAST(2, 5)
  if (groups > 1) {
    return at::scaled_dot_product_attention(q, k, v, mask, 0.0, /*is_causal=*/false,
                                            /*scale=*/std::nullopt, /*enable_gqa=*/true);
  }
#endif
  if (groups > 1) {
    return at::scaled_dot_product_attention(q, k.repeat_interleave(groups, 1),
                                            v.repeat_interleave(groups, 1), mask, 0.0, false);
  }
  return at::scaled_dot_product_attention(q, k, v, mask, 0.0, /*is_causal=*/false);
}

inline std::string torch_version_string() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

}  // namespace lmtrain::compat
