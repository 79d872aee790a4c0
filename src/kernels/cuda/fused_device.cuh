// What the fused GPU kernels' files share (fused_kernels.cu, fused_qkv_split.cu,
// fused_classifier.cu; moe_rows.cu takes its loads, stores, warp sum and launch helpers too): the
// launch shapes, loads that widen to fp32 and stores that round to the
// element type (bf16: round to nearest even, as kernels::bf16_round), a warp's sum, and the host
// side's launch check and element-type dispatch. Only .cu files include it.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/fused_cuda.h"

namespace lmtrain::kernels::fused_device {

constexpr int kWarp = 32;
constexpr int kRowThreads = 256;  // 8 warps, one row each
constexpr int kRowsPerWarpBlock = kRowThreads / kWarp;
constexpr int64_t kRowsPerChunk = 256;  // rows summed by one column-sum block
constexpr int kColumnTile = 32;         // columns of one column-sum block (one per lane)
constexpr int kColumnRowThreads = 8;    // row lanes of one column-sum block

__device__ __forceinline__ float load(const float* p) { return *p; }
__device__ __forceinline__ float load(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
// The value a store then a load gives (h is re-read after it is stored).
template <class T>
__device__ __forceinline__ float stored(float v) {
  T t;
  store(&t, v);
  return load(&t);
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

inline void check_launch(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    throw std::runtime_error(std::string(what) +
                             ": CUDA launch failed: " + cudaGetErrorString(err));
}

inline int64_t blocks_for(int64_t items, int64_t per_block) {
  return (items + per_block - 1) / per_block;
}

inline cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

// Calls f with a null pointer of the C++ type of `t` (float or __nv_bfloat16).
template <class F>
void with_type(ElementType t, F&& f) {
  if (t == ElementType::kBFloat16) {
    f(static_cast<__nv_bfloat16*>(nullptr));
  } else {
    f(static_cast<float*>(nullptr));
  }
}

}  // namespace lmtrain::kernels::fused_device
