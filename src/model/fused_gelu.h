// GELU with the tanh approximation as one autograd function for CPU fp32 tensors. libtorch
// 1.13 evaluates tanh with Sleef's 1-ulp routine, forward and again in backward; this uses a
// vectorised exp-based tanh (kernels/cpu_kernels.h) and is several times faster, equal to
// torch::gelu(x, "tanh") within float rounding.
#pragma once
#include <ATen/core/Tensor.h>

namespace lmtrain::model {

// y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). Falls back to torch::gelu for tensors
// the kernel does not take (non-CPU, non-float, or kernels switched off).
at::Tensor gelu_tanh(const at::Tensor& x);

}  // namespace lmtrain::model
