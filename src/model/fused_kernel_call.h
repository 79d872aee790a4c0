// What the fused ops' dispatch points (model/fused_*.cpp, and the chunked head that calls the
// classifier) share: which element types the kernels take, the dtype an op computes in under
// autocast, the current CUDA stream, and fp32 copies for the CPU references.
#pragma once
#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>

#include "kernels/fused_cuda.h"

#ifdef LMTRAIN_CUDA_KERNELS
#include <c10/cuda/CUDAStream.h>
#endif

namespace lmtrain::model::fused {

// fp32 and bf16: the types the kernels are written for (fp16 takes libtorch's ops).
inline bool kernel_dtype(at::ScalarType t) { return t == at::kFloat || t == at::kBFloat16; }
inline bool kernel_type(const at::Tensor& t) { return kernel_dtype(t.scalar_type()); }

inline kernels::ElementType element_type(at::ScalarType t) {
  return t == at::kBFloat16 ? kernels::ElementType::kBFloat16 : kernels::ElementType::kFloat32;
}
inline kernels::ElementType element_type(const at::Tensor& t) {
  return element_type(t.scalar_type());
}

// The dtype an op on `t` computes in: autocast's where it is on for t's device (the cast a
// GEMM would make), else t's own.
inline at::ScalarType compute_dtype(const at::Tensor& t) {
  const auto type = t.device().type();
  return at::autocast::is_autocast_enabled(type) ? at::autocast::get_autocast_dtype(type)
                                                 : t.scalar_type();
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
