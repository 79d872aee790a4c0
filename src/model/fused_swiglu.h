// SwiGLU as one pass each way (kernels: swiglu): y = silu(gate) * up from h = [gate; up].
//
// libtorch's path is three ops forward (two narrows feed silu and a multiply) and in the
// backward silu's gradient, two multiplies and the zero-filled cat of the two halves' gradients:
// five passes over a (rows, 2 hidden) tensor become one.
#pragma once
#include <ATen/core/Tensor.h>

namespace lmtrain::model {

// h: (..., 2 hidden) = [gate | up] -> (..., hidden). The fused kernel runs when it is switched on
// for h's device (kernels/kernel_switch.h) and h is fp32 or bf16; otherwise libtorch's ops.
at::Tensor swiglu(const at::Tensor& h, int64_t hidden);

// The libtorch path (tests hold the kernel to it).
at::Tensor swiglu_unfused(const at::Tensor& h, int64_t hidden);

}  // namespace lmtrain::model
