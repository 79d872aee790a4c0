// Every difference between libtorch 1.13 (Debian, CPU) and 2.x (CUDA machines) lives here.
#pragma once
#include <ATen/ATen.h>
#include <torch/version.h>

#define LMTRAIN_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||          \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace lmtrain::compat {

// Causal scaled-dot-product attention on (B, H, T, D) tensors -> (B, H, T, D).
// 2.x: the public fused kernel (flash / memory-efficient on CUDA, fused math on CPU).
// 1.13: the private `_scaled_dot_product_attention` exists but on CPU it is the unfused math
// path, so we use an explicit, allocation-light formulation instead (see model/attention.cpp).
inline constexpr bool kHasFusedSdpa = LMTRAIN_TORCH_AT_LEAST(2, 0);

#if LMTRAIN_TORCH_AT_LEAST(2, 0)
inline at::Tensor fused_causal_sdpa(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    double dropout_p) {
  return at::scaled_dot_product_attention(q, k, v, {}, dropout_p, /*is_causal=*/true);
}
#else
inline at::Tensor fused_causal_sdpa(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    double dropout_p) {
  return std::get<0>(at::_scaled_dot_product_attention(q, k, v, {}, dropout_p, false, true));
}
#endif

inline std::string torch_version_string() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

}  // namespace lmtrain::compat
