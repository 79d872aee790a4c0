// The fused packed-QKV split behind kernels/fused_cuda.h: q, k and v out of one packed
// projection with QK-norm and RoPE, and its backward. The per-element math is kernels/fused_math.h,
// shared with the CPU reference (kernels/fused_reference.cpp); the layout is one warp per
// (b, t, slot), and the norm weights' column sums go to a partial buffer in a fixed order, as the
// other fused kernels' (fused_kernels.cu).
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/fused_device.cuh"
#include "kernels/fused_cuda.h"

namespace lmtrain::kernels {
namespace {

using namespace fused_device;  // NOLINT(google-build-using-namespace): this file's helpers

// ---- Packed QKV -> q, k, v with QK-norm and RoPE --------------------------------------------
// One warp per (b, t, slot); lane l holds the pairs (p, p + D/2) for p = l, l + 32, ... < D/2.

// The packed row (b, t, slot j) of this warp and where it goes; invalid past the last row.
struct QkvWarpRow {
  bool valid;
  int lane;
  int64_t row, t;
  QkvRow r;
};

__device__ __forceinline__ QkvWarpRow qkv_warp_row(const QkvShape& s) {
  const int64_t slots = s.H + 2 * s.K;
  QkvWarpRow w{};
  w.row = static_cast<int64_t>(blockIdx.x) * kRowsPerWarpBlock + threadIdx.x / kWarp;
  w.lane = threadIdx.x % kWarp;
  w.valid = w.row < s.B * s.T * slots;
  if (!w.valid) return w;
  const int64_t j = w.row % slots, b = w.row / (slots * s.T);
  w.t = (w.row / slots) % s.T;
  w.r = qkv_row(s, b, w.t, j);
  return w;
}

template <class T>
__global__ void qkv_split_forward_kernel(const T* packed, const float* q_w, const float* k_w,
                                         const float* cos, const float* sin, QkvShape s, float eps,
                                         T* q, T* k, T* v, float* rstd) {
  const QkvWarpRow wr = qkv_warp_row(s);
  if (!wr.valid) return;
  const int64_t half = s.D / 2, t = wr.t;
  const int lane = wr.lane;
  const T* src = packed + wr.row * s.D;
  const QkvRow& r = wr.r;
  T* out = qkv_pick(r.part, q, k, v) + r.offset;
  const float* w = qkv_pick<const float>(r.part, q_w, k_w, nullptr);
  const bool rotate = r.part != QkvPart::kValue && cos;
  float rs = 1.0f;
  if (w) {
    float square_sum = 0;
    for (int64_t p = lane; p < half; p += kWarp) {
      const float x1 = load(src + p), x2 = load(src + p + half);
      square_sum += x1 * x1 + x2 * x2;
    }
    rs = norm_rstd(warp_sum(square_sum), s.D, eps);
    if (lane == 0) rstd[r.norm_row] = rs;
  }
  for (int64_t p = lane; p < half; p += kWarp) {
    float n1 = load(src + p), n2 = load(src + p + half);
    if (w) {
      n1 = norm_output(n1, 0.0f, rs, w[p], 0.0f);
      n2 = norm_output(n2, 0.0f, rs, w[p + half], 0.0f);
    }
    if (rotate) rope_rotate(n1, n2, cos[t * half + p], sin[t * half + p], &n1, &n2);
    store(out + p, n1);
    store(out + p + half, n2);
  }
}

// The gradient of one row before the norm: the inverse rotation of dy.
template <class T>
__device__ __forceinline__ void qkv_unrotated_grad(const T* dy, const float* cos, const float* sin,
                                                   int64_t t, int64_t p, int64_t half, bool rotate,
                                                   float* dn1, float* dn2) {
  *dn1 = load(dy + p);
  *dn2 = load(dy + p + half);
  if (rotate) rope_rotate_back(*dn1, *dn2, cos[t * half + p], sin[t * half + p], dn1, dn2);
}

template <class T>
__global__ void qkv_split_backward_kernel(const T* packed, const float* q_w, const float* k_w,
                                          const float* cos, const float* sin, QkvShape s,
                                          const float* rstd, const T* dq, const T* dk, const T* dv,
                                          T* dpacked) {
  const QkvWarpRow wr = qkv_warp_row(s);
  if (!wr.valid) return;
  const int64_t half = s.D / 2, t = wr.t;
  const int lane = wr.lane;
  const T* src = packed + wr.row * s.D;
  T* dsrc = dpacked + wr.row * s.D;
  const QkvRow& r = wr.r;
  const T* dy = qkv_pick(r.part, dq, dk, dv) + r.offset;
  const float* w = qkv_pick<const float>(r.part, q_w, k_w, nullptr);
  const bool rotate = r.part != QkvPart::kValue && cos;
  if (!w) {
    for (int64_t p = lane; p < half; p += kWarp) {
      float dn1, dn2;
      qkv_unrotated_grad(dy, cos, sin, t, p, half, rotate, &dn1, &dn2);
      store(dsrc + p, dn1);
      store(dsrc + p + half, dn2);
    }
    return;
  }
  const float rs = rstd[r.norm_row];
  float sum_gx = 0;
  for (int64_t p = lane; p < half; p += kWarp) {
    float dn1, dn2;
    qkv_unrotated_grad(dy, cos, sin, t, p, half, rotate, &dn1, &dn2);
    sum_gx += dn1 * w[p] * load(src + p) * rs + dn2 * w[p + half] * load(src + p + half) * rs;
  }
  const float mean_gx = warp_sum(sum_gx) / static_cast<float>(s.D);
  for (int64_t p = lane; p < half; p += kWarp) {
    float dn1, dn2;
    qkv_unrotated_grad(dy, cos, sin, t, p, half, rotate, &dn1, &dn2);
    const float xhat1 = load(src + p) * rs, xhat2 = load(src + p + half) * rs;
    store(dsrc + p, norm_input_grad(dn1 * w[p], xhat1, rs, 0.0f, mean_gx));
    store(dsrc + p + half, norm_input_grad(dn2 * w[p + half], xhat2, rs, 0.0f, mean_gx));
  }
}

// Column sums of dn * xhat for the query (blockIdx.z = 0) and key (1) heads: block
// (kColumnTile, kColumnRowThreads) covers columns [tile * 32, +32) of D over the (b, t) rows
// [chunk * kRowsPerChunk, +kRowsPerChunk), every head of its kind.
template <class T>
__global__ void qkv_norm_weight_grad_kernel(const T* packed, const float* cos, const float* sin,
                                            QkvShape s, const float* rstd, const T* dq, const T* dk,
                                            float* dw_partial) {
  __shared__ float sums[kColumnRowThreads][kColumnTile];
  const int64_t slots = s.H + 2 * s.K, half = s.D / 2, rows = s.B * s.T;
  const bool keys = blockIdx.z == 1;
  const int64_t heads = keys ? s.K : s.H, first_slot = keys ? s.H : 0;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kColumnTile + threadIdx.x;  // column
  const int64_t first = static_cast<int64_t>(blockIdx.y) * kRowsPerChunk;
  const int64_t last = first + kRowsPerChunk < rows ? first + kRowsPerChunk : rows;
  float acc = 0;
  if (i < s.D) {
    const int64_t p = i < half ? i : i - half;
    for (int64_t bt = first + threadIdx.y; bt < last; bt += kColumnRowThreads) {
      const int64_t b = bt / s.T, t = bt % s.T;
      for (int64_t head = 0; head < heads; ++head) {
        const int64_t j = first_slot + head;
        const QkvRow r = qkv_row(s, b, t, j);
        float dn1, dn2;
        qkv_unrotated_grad((keys ? dk : dq) + r.offset, cos, sin, t, p, half, cos != nullptr, &dn1,
                           &dn2);
        const float x = load(packed + (bt * slots + j) * s.D + i);
        acc += (i < half ? dn1 : dn2) * x * rstd[r.norm_row];
      }
    }
  }
  sums[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && i < s.D) {
    for (int y = 1; y < kColumnRowThreads; ++y) acc += sums[y][threadIdx.x];
    dw_partial[(blockIdx.y * 2 + blockIdx.z) * s.D + i] = acc;
  }
}

}  // namespace

void qkv_split_forward_cuda(const void* packed, const float* q_w, const float* k_w,
                            const float* cos, const float* sin, const QkvShape& s, float eps,
                            ElementType type, void* q, void* k, void* v, float* rstd,
                            void* stream) {
  const int64_t rows = s.B * s.T * (s.H + 2 * s.K);
  if (rows == 0) return;
  with_type(type, [&](auto* tp) {
    using T = std::remove_pointer_t<decltype(tp)>;
    qkv_split_forward_kernel<T>
        <<<blocks_for(rows, kRowsPerWarpBlock), kRowThreads, 0, as_stream(stream)>>>(
            static_cast<const T*>(packed), q_w, k_w, cos, sin, s, eps, static_cast<T*>(q),
            static_cast<T*>(k), static_cast<T*>(v), rstd);
  });
  check_launch("qkv_split_forward");
}

int64_t qkv_norm_partial_rows(int64_t rows) { return blocks_for(rows, kRowsPerChunk); }

void qkv_split_backward_cuda(const void* packed, const float* q_w, const float* k_w,
                             const float* cos, const float* sin, const QkvShape& s,
                             const float* rstd, const void* dq, const void* dk, const void* dv,
                             ElementType type, void* dpacked, float* dw_partial, void* stream) {
  const int64_t rows = s.B * s.T * (s.H + 2 * s.K);
  if (rows == 0) return;
  with_type(type, [&](auto* tp) {
    using T = std::remove_pointer_t<decltype(tp)>;
    qkv_split_backward_kernel<T>
        <<<blocks_for(rows, kRowsPerWarpBlock), kRowThreads, 0, as_stream(stream)>>>(
            static_cast<const T*>(packed), q_w, k_w, cos, sin, s, rstd, static_cast<const T*>(dq),
            static_cast<const T*>(dk), static_cast<const T*>(dv), static_cast<T*>(dpacked));
    if (q_w) {
      const dim3 grid(blocks_for(s.D, kColumnTile), qkv_norm_partial_rows(s.B * s.T), 2);
      qkv_norm_weight_grad_kernel<T>
          <<<grid, dim3(kColumnTile, kColumnRowThreads), 0, as_stream(stream)>>>(
              static_cast<const T*>(packed), cos, sin, s, rstd, static_cast<const T*>(dq),
              static_cast<const T*>(dk), dw_partial);
    }
  });
  check_launch("qkv_split_backward");
}

}  // namespace lmtrain::kernels
