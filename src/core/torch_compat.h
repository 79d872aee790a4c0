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

inline std::string torch_version_string() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

}  // namespace lmtrain::compat
