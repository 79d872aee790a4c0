// The fused GPU kernels behind kernels/fused_cuda.h. The per-element math is
// kernels/fused_math.h, shared with the CPU references (kernels/fused_reference.cpp) that the
// CPU tests hold to libtorch; here only the parallel layout differs:
// - a row op (a norm over C, one head's D) is one warp: lanes stride the row, warp shuffles sum;
// - column sums of weight gradients are a second kernel over tiles of columns x chunks of rows,
//   each chunk's sum written to its own row of a partial buffer (summed by the caller), so the
//   bits do not depend on scheduling;
// - elementwise ops are grid-stride loops.
// Loads widen to fp32 and stores round to the element type (bf16: round to nearest even, as
// kernels::bf16_round).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/fused_cuda.h"

namespace lmtrain::kernels {
namespace {

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

void check_launch(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    throw std::runtime_error(std::string(what) +
                             ": CUDA launch failed: " + cudaGetErrorString(err));
}

int64_t blocks_for(int64_t items, int64_t per_block) { return (items + per_block - 1) / per_block; }

cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

// Calls f with a null pointer of the C++ type of `t` (float or __nv_bfloat16).
template <class F>
void with_type(ElementType t, F&& f) {
  if (t == ElementType::kBFloat16) {
    f(static_cast<__nv_bfloat16*>(nullptr));
  } else {
    f(static_cast<float*>(nullptr));
  }
}

// ---- Residual add + norm ------------------------------------------------------------------

template <class TX, class TD, class TY>
__global__ void add_norm_forward_kernel(const TX* x, const TD* delta, const float* w,
                                        const float* b, int64_t N, int64_t C, float eps, bool rms,
                                        TX* h, TY* y, float* mean, float* rstd) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerWarpBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= N) return;
  const TX* xr = x + row * C;
  const TX* hr = xr;  // the row the norm reads: x + delta as stored, or x
  float sum = 0;
  if (delta) {
    TX* out = h + row * C;
    for (int64_t c = lane; c < C; c += kWarp) {
      const float s = stored<TX>(load(xr + c) + load(delta + row * C + c));
      store(out + c, s);
      sum += s;
    }
    hr = out;  // each lane re-reads only what it stored
  } else {
    for (int64_t c = lane; c < C; c += kWarp) sum += load(xr + c);
  }
  sum = warp_sum(sum);
  const float mu = rms ? 0.0f : sum / static_cast<float>(C);
  float square_sum = 0;
  for (int64_t c = lane; c < C; c += kWarp) {
    const float d = load(hr + c) - mu;
    square_sum += d * d;
  }
  const float rs = norm_rstd(warp_sum(square_sum), C, eps);
  for (int64_t c = lane; c < C; c += kWarp)
    store(y + row * C + c, norm_output(load(hr + c), mu, rs, w[c], b ? b[c] : 0.0f));
  if (lane == 0) {
    mean[row] = mu;
    rstd[row] = rs;
  }
}

template <class TX, class TY>
__global__ void add_norm_input_grad_kernel(const TX* h, const float* w, const float* mean,
                                           const float* rstd, const TY* dy, const TX* dh, int64_t N,
                                           int64_t C, bool rms, TX* dx) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerWarpBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= N) return;
  const TX* hr = h + row * C;
  const TY* dyr = dy + row * C;
  const float mu = mean[row], rs = rstd[row];
  float sum_g = 0, sum_gx = 0;
  for (int64_t c = lane; c < C; c += kWarp) {
    const float g = load(dyr + c) * w[c];
    sum_g += g;
    sum_gx += g * (load(hr + c) - mu) * rs;
  }
  const float mean_g = rms ? 0.0f : warp_sum(sum_g) / static_cast<float>(C);
  const float mean_gx = warp_sum(sum_gx) / static_cast<float>(C);
  for (int64_t c = lane; c < C; c += kWarp) {
    const float xhat = (load(hr + c) - mu) * rs;
    const float g = load(dyr + c) * w[c];
    const float direct = dh ? load(dh + row * C + c) : 0.0f;
    store(dx + row * C + c, norm_input_grad(g, xhat, rs, mean_g, mean_gx) + direct);
  }
}

// Block (kColumnTile, kColumnRowThreads) sums columns [tile * 32, +32) over rows
// [chunk * kRowsPerChunk, +kRowsPerChunk): dw += dy * xhat, db += dy.
template <class TX, class TY>
__global__ void add_norm_weight_grad_kernel(const TX* h, const float* mean, const float* rstd,
                                            const TY* dy, int64_t N, int64_t C, float* dw_partial,
                                            float* db_partial) {
  __shared__ float dw_sum[kColumnRowThreads][kColumnTile];
  __shared__ float db_sum[kColumnRowThreads][kColumnTile];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kColumnTile + threadIdx.x;
  const int64_t first = static_cast<int64_t>(blockIdx.y) * kRowsPerChunk;
  const int64_t last = first + kRowsPerChunk < N ? first + kRowsPerChunk : N;
  float dw = 0, db = 0;
  if (c < C) {
    for (int64_t r = first + threadIdx.y; r < last; r += kColumnRowThreads) {
      const float g = load(dy + r * C + c);
      dw += g * (load(h + r * C + c) - mean[r]) * rstd[r];
      db += g;
    }
  }
  dw_sum[threadIdx.y][threadIdx.x] = dw;
  db_sum[threadIdx.y][threadIdx.x] = db;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    for (int i = 1; i < kColumnRowThreads; ++i) {  // fixed order
      dw += dw_sum[i][threadIdx.x];
      db += db_sum[i][threadIdx.x];
    }
    dw_partial[blockIdx.y * C + c] = dw;
    if (db_partial) db_partial[blockIdx.y * C + c] = db;
  }
}

// ---- SwiGLU ---------------------------------------------------------------------------------

template <class T>
__global__ void swiglu_forward_kernel(const T* h, int64_t N, int64_t H, T* y) {
  const int64_t total = N * H;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / H, c = i % H;
    store(y + i, swiglu_output(load(h + r * 2 * H + c), load(h + r * 2 * H + H + c)));
  }
}

template <class T>
__global__ void swiglu_backward_kernel(const T* h, const T* dy, int64_t N, int64_t H, T* dh) {
  const int64_t total = N * H;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / H, c = i % H;
    float dgate, dup;
    swiglu_grads(load(h + r * 2 * H + c), load(h + r * 2 * H + H + c), load(dy + i), &dgate, &dup);
    store(dh + r * 2 * H + c, dgate);
    store(dh + r * 2 * H + H + c, dup);
  }
}

int elementwise_blocks(int64_t total) {
  return static_cast<int>(std::min<int64_t>(blocks_for(total, 256), 65535));
}

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

bool fused_cuda_kernels_built() { return true; }

void add_norm_forward_cuda(const void* x, const void* delta, const float* w, const float* b,
                           int64_t N, int64_t C, float eps, bool rms, AddNormTypes types, void* h,
                           void* y, float* mean, float* rstd, void* stream) {
  if (N == 0) return;
  with_type(types.x, [&](auto* tx) {
    using TX = std::remove_pointer_t<decltype(tx)>;
    with_type(types.delta, [&](auto* td) {
      using TD = std::remove_pointer_t<decltype(td)>;
      with_type(types.y, [&](auto* ty) {
        using TY = std::remove_pointer_t<decltype(ty)>;
        add_norm_forward_kernel<TX, TD, TY>
            <<<blocks_for(N, kRowsPerWarpBlock), kRowThreads, 0, as_stream(stream)>>>(
                static_cast<const TX*>(x), static_cast<const TD*>(delta), w, b, N, C, eps, rms,
                static_cast<TX*>(h), static_cast<TY*>(y), mean, rstd);
      });
    });
  });
  check_launch("add_norm_forward");
}

int64_t add_norm_partial_rows(int64_t N) { return blocks_for(N, kRowsPerChunk); }

void add_norm_backward_cuda(const void* h, const float* w, const float* mean, const float* rstd,
                            const void* dy, const void* dh, int64_t N, int64_t C, bool rms,
                            AddNormTypes types, void* dx, float* dw_partial, float* db_partial,
                            void* stream) {
  if (N == 0) return;
  with_type(types.x, [&](auto* tx) {
    using TX = std::remove_pointer_t<decltype(tx)>;
    with_type(types.y, [&](auto* ty) {
      using TY = std::remove_pointer_t<decltype(ty)>;
      add_norm_input_grad_kernel<TX, TY>
          <<<blocks_for(N, kRowsPerWarpBlock), kRowThreads, 0, as_stream(stream)>>>(
              static_cast<const TX*>(h), w, mean, rstd, static_cast<const TY*>(dy),
              static_cast<const TX*>(dh), N, C, rms, static_cast<TX*>(dx));
      const dim3 grid(blocks_for(C, kColumnTile), add_norm_partial_rows(N));
      add_norm_weight_grad_kernel<TX, TY>
          <<<grid, dim3(kColumnTile, kColumnRowThreads), 0, as_stream(stream)>>>(
              static_cast<const TX*>(h), mean, rstd, static_cast<const TY*>(dy), N, C, dw_partial,
              db_partial);
    });
  });
  check_launch("add_norm_backward");
}

void swiglu_forward_cuda(const void* h, int64_t N, int64_t H, ElementType type, void* y,
                         void* stream) {
  if (N * H == 0) return;
  with_type(type, [&](auto* tp) {
    using T = std::remove_pointer_t<decltype(tp)>;
    swiglu_forward_kernel<T><<<elementwise_blocks(N * H), 256, 0, as_stream(stream)>>>(
        static_cast<const T*>(h), N, H, static_cast<T*>(y));
  });
  check_launch("swiglu_forward");
}

void swiglu_backward_cuda(const void* h, const void* dy, int64_t N, int64_t H, ElementType type,
                          void* dh, void* stream) {
  if (N * H == 0) return;
  with_type(type, [&](auto* tp) {
    using T = std::remove_pointer_t<decltype(tp)>;
    swiglu_backward_kernel<T><<<elementwise_blocks(N * H), 256, 0, as_stream(stream)>>>(
        static_cast<const T*>(h), static_cast<const T*>(dy), N, H, static_cast<T*>(dh));
  });
  check_launch("swiglu_backward");
}

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
