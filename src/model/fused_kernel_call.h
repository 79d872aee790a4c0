// What the fused ops' dispatch points (model/fused_add_norm.cpp, fused_swiglu.cpp,
// fused_qkv_split.cpp) share: which element types the kernels take, the current CUDA stream,
// and fp32 copies for the CPU references.
#pragma once
#include <ATen/ATen.h>

#include "kernels/fused_cuda.h"

#ifdef LMTRAIN_CUDA_KERNELS
#include <c10/cuda/CUDAStream.h>
#endif

namespace lmtrain::model::fused {

// fp32 and bf16: the types the kernels are written for (fp16 takes libtorch's ops).
inline bool kernel_type(const at::Tensor& t) {
  return t.scalar_type() == at::kFloat || t.scalar_type() == at::kBFloat16;
}

inline kernels::ElementType element_type(const at::Tensor& t) {
  return t.scalar_type() == at::kBFloat16 ? kernels::ElementType::kBFloat16
                                          : kernels::ElementType::kFloat32;
}

// libtorch's custom autograd functions take no undefined tensor among their inputs: an absent
// optional input (no residual delta, no bias, no QK-norm, no rotation) travels as an empty
// tensor instead, and is absent again inside (`present`).
inline at::Tensor absent_as_empty(const at::Tensor& t, const at::Tensor& like) {
  return t.defined() ? t : at::empty({0}, like.options());
}
inline bool present(const at::Tensor& t) { return t.defined() && t.numel() > 0; }

// The data pointer of an optional tensor (null when absent).
inline const void* data_or_null(const at::Tensor& t) { return present(t) ? t.data_ptr() : nullptr; }
inline const float* floats_or_null(const at::Tensor& t) {
  return present(t) ? t.data_ptr<float>() : nullptr;
}

// A contiguous fp32 copy for a CPU reference (an absent tensor stays absent).
inline at::Tensor cpu_floats(const at::Tensor& t) {
  return present(t) ? t.to(at::kFloat).contiguous() : at::Tensor();
}

// The stream the kernels launch on: libtorch's current one for the tensor's device, so they
// order with its ops and are captured by CUDA graphs like them.
inline void* current_stream(const at::Tensor& t) {
#ifdef LMTRAIN_CUDA_KERNELS
  return c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
#else
  (void)t;
  return nullptr;
#endif
}

}  // namespace lmtrain::model::fused
