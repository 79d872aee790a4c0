// The fused classifier behind kernels/fused_cuda.h: the LM head's softmax cross-entropy and its
// gradient written over the logits in place, one block per row. The per-element math is
// kernels/fused_math.h, shared with the CPU reference (kernels/fused_reference.cpp).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/fused_device.cuh"
#include "kernels/fused_cuda.h"

namespace lmtrain::kernels {
namespace {

using namespace fused_device;  // NOLINT(google-build-using-namespace): this file's helpers

// ---- Classifier ---------------------------------------------------------------------------

constexpr int kClassifierThreads = 512;  // one block per row of V (50k for GPT-2) logits

__device__ __forceinline__ SoftmaxStats warp_merge(SoftmaxStats st) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    const SoftmaxStats other{__shfl_xor_sync(0xffffffffu, st.max, offset),
                             __shfl_xor_sync(0xffffffffu, st.sum, offset)};
    st = softmax_stats_merge(st, other);
  }
  return st;
}

// A row of logits visited in 16-byte vectors (8 bf16 or 4 fp32 per load and store, where the
// scalar loop moves 2 or 4 bytes per thread and instruction): the scalars before the row's first
// 16-byte boundary (a row of an odd V starts anywhere), the vectors strided over the block, then
// the scalars after the last whole vector. f(i, logit) sees every element once.
constexpr int kVectorBytes = 16;
template <class T>
constexpr int kPerVector = kVectorBytes / static_cast<int>(sizeof(T));

struct RowSplit {
  int64_t head;     // scalars before the first 16-byte boundary (< kPerVector)
  int64_t vectors;  // whole vectors after them
};

template <class T>
__device__ __forceinline__ RowSplit split_row(const T* row, int64_t V) {
  const auto misalign = static_cast<int64_t>(reinterpret_cast<uintptr_t>(row) % kVectorBytes);
  int64_t head = misalign == 0 ? 0 : (kVectorBytes - misalign) / static_cast<int64_t>(sizeof(T));
  head = head < V ? head : V;
  return {head, (V - head) / kPerVector<T>};
}

// With `write`, f returns the element's new value, stored in place (a whole vector at once).
template <bool write, class T, class F>
__device__ __forceinline__ void visit_row_vectorized(T* row, int64_t V, F&& f) {
  // Element i of the row, held at p (the row itself, or a vector's registers).
  auto visit = [&](T* p, int64_t i) {
    if constexpr (write) {
      store(p, f(i, load(p)));
    } else {
      f(i, load(p));
    }
  };
  const RowSplit s = split_row(row, V);
  if (threadIdx.x < s.head) visit(row + threadIdx.x, threadIdx.x);
  uint4* body = reinterpret_cast<uint4*>(row + s.head);
  for (int64_t j = threadIdx.x; j < s.vectors; j += blockDim.x) {
    alignas(kVectorBytes) T v[kPerVector<T>];
    *reinterpret_cast<uint4*>(v) = body[j];
    const int64_t first = s.head + j * kPerVector<T>;
#pragma unroll
    for (int e = 0; e < kPerVector<T>; ++e) visit(v + e, first + e);
    if constexpr (write) body[j] = *reinterpret_cast<const uint4*>(v);
  }
  for (int64_t i = s.head + s.vectors * kPerVector<T> + threadIdx.x; i < V; i += blockDim.x)
    visit(row + i, i);
}

// Pass 1: each thread's statistics over its strided logits, merged in a fixed order (warps by
// shuffles, then thread 0 over the warps), and the loss; pass 2 (write_grad): the gradient in
// place. Thread 0 reads the target's logit before the barrier that lets pass 2 overwrite it.
// `vectorized` moves the row in 16-byte vectors (visit_row_vectorized): the same per-element
// math, each thread's statistics gathered over other elements, so the sums round differently.
template <class T, bool vectorized>
__global__ void classifier_kernel(T* logits, const int64_t* targets, const float* row_scale,
                                  int64_t V, float cap, bool write_grad, float* loss) {
  __shared__ SoftmaxStats warp_stats[kClassifierThreads / kWarp];
  __shared__ SoftmaxStats row_stats;
  const int64_t row = blockIdx.x;
  T* lr = logits + row * V;
  SoftmaxStats st{-INFINITY, 0.0f};
  auto add = [&](int64_t, float l) { st = softmax_stats_add(st, classifier_logit(l, cap)); };
  if constexpr (vectorized) {
    visit_row_vectorized<false>(lr, V, add);
  } else {
    for (int64_t i = threadIdx.x; i < V; i += kClassifierThreads) add(i, load(lr + i));
  }
  st = warp_merge(st);
  if (threadIdx.x % kWarp == 0) warp_stats[threadIdx.x / kWarp] = st;
  __syncthreads();
  const int64_t t = targets[row];
  if (threadIdx.x == 0) {
    SoftmaxStats all = warp_stats[0];
    for (int w = 1; w < kClassifierThreads / kWarp; ++w)
      all = softmax_stats_merge(all, warp_stats[w]);
    row_stats = all;
    loss[row] = t >= 0 && t < V ? classifier_loss(all, classifier_logit(load(lr + t), cap)) : NAN;
  }
  __syncthreads();
  if (!write_grad) return;
  const SoftmaxStats all = row_stats;
  const float scale = row_scale[row];
  auto grad = [&](int64_t i, float l) {
    return classifier_logit_grad(classifier_logit(l, cap), all, i == t, scale, cap);
  };
  if constexpr (vectorized) {
    visit_row_vectorized<true>(lr, V, grad);
  } else {
    for (int64_t i = threadIdx.x; i < V; i += kClassifierThreads)
      store(lr + i, grad(i, load(lr + i)));
  }
}

}  // namespace

void classifier_cuda(void* logits, ElementType type, const int64_t* targets, const float* row_scale,
                     int64_t n, int64_t V, float cap, bool write_grad, float* loss, bool vectorized,
                     void* stream) {
  if (n == 0) return;
  with_type(type, [&](auto* tp) {
    using T = std::remove_pointer_t<decltype(tp)>;
    auto* kernel = vectorized ? classifier_kernel<T, true> : classifier_kernel<T, false>;
    kernel<<<n, kClassifierThreads, 0, as_stream(stream)>>>(static_cast<T*>(logits), targets,
                                                            row_scale, V, cap, write_grad, loss);
  });
  check_launch("classifier");
}

}  // namespace lmtrain::kernels
