// The fused GPU kernels behind kernels/fused_cuda.h: the residual add + norm and SwiGLU (the
// packed-QKV split is fused_qkv_split.cu, the classifier fused_classifier.cu). The per-element math
// is kernels/fused_math.h, shared with the CPU references (kernels/fused_reference.cpp) that the
// CPU tests hold to libtorch; here only the parallel layout differs:
// - a row op (a norm over C, one head's D) is one warp: lanes stride the row, warp shuffles sum;
// - column sums of weight gradients are a second kernel over tiles of columns x chunks of rows,
//   each chunk's sum written to its own row of a partial buffer (summed by the caller), so the
//   bits do not depend on scheduling;
// - elementwise ops are grid-stride loops.
// Loads widen to fp32 and stores round to the element type (bf16: round to nearest even, as
// kernels::bf16_round).
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/fused_device.cuh"
#include "kernels/fused_cuda.h"

namespace lmtrain::kernels {
namespace {

using namespace fused_device;  // NOLINT(google-build-using-namespace): this file's helpers

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

}  // namespace lmtrain::kernels
