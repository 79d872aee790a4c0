// The residual add and the norm that follows it, as one pass (kernels: add_norm).
//
// A pre-norm block computes h = x + attn(...) and then norm(h) for the next sublayer: two passes
// over the (B, T, C) stream, a third and fourth in the backward, plus the norm's own statistics
// passes. The fused op reads x and delta once, writes h and y = norm(h), and keeps only the
// row statistics (mean, rstd) for the backward, which gives dx (= d delta) in one pass and the
// weight gradients in a column-sum pass.
#pragma once
#include <ATen/core/Tensor.h>

namespace lmtrain::model {

struct AddNormOutput {
  at::Tensor h;  // (..., C): x + delta, or x itself when there is no delta
  at::Tensor y;  // (..., C): norm(h)
};

// y = LayerNorm(h) (weight, bias or undefined) or, with rms, RMSNorm h / sqrt(mean(h^2) + eps) *
// weight; h = x + delta, or x when delta is undefined. The fused kernel runs when it is switched
// on for x's device (kernels/kernel_switch.h) and the types fit (fp32 or bf16; an fp32 x may take
// a bf16 delta); otherwise the same result comes from libtorch's ops (`unfused`). Under a bf16
// autocast the kernel stores y in bf16 (the dtype the next linear layer casts it to); h keeps
// x's type.
AddNormOutput add_norm(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& weight,
                       const at::Tensor& bias, bool rms, double eps);

// Whether add_norm takes the fused kernel for these inputs.
bool add_norm_fused(const at::Tensor& x, const at::Tensor& delta);

// The libtorch path: what the kernel is held to (tests) and the fallback.
at::Tensor norm_unfused(const at::Tensor& h, const at::Tensor& weight, const at::Tensor& bias,
                        bool rms, double eps);

}  // namespace lmtrain::model
