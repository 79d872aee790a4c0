// The MoE row moves behind kernels/moe_rows_cuda.h. The per-row math is kernels/moe_rows_math.h,
// shared with the CPU references (kernels/moe_rows_reference.cpp) that the CPU tests hold to
// libtorch; here only the parallel layout differs:
// - one warp per output row (a sorted row for the permute, a token for the rest); its lanes
//   stride the row's columns in packs of kPack elements (one 16-byte load for fp32, 8 for bf16)
//   when the row length and the pointers allow, else one element at a time;
// - a token's k slots are visited in slot order by every lane, so each output element is one
//   thread's fp32 sum in a fixed order, and dw's row sum is a warp shuffle reduction: the same
//   bits on every run, no atomics (libtorch's index_select backward is an atomic index_add_).
// Loads widen to fp32 and stores round to the element type (bf16: round to nearest even, as
// kernels::bf16_round).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/fused_device.cuh"
#include "kernels/moe_rows_cuda.h"
#include "kernels/moe_rows_math.h"

namespace lmtrain::kernels {
namespace {
namespace moe {  // the helpers' names stay clear of fused_kernels.cu's, even in one batch

// The loads, stores, warp sum and launch helpers the fused kernels use.
using fused_device::as_stream;
using fused_device::check_launch;
using fused_device::kWarp;
using fused_device::load;
using fused_device::store;
using fused_device::warp_sum;

constexpr int kThreads = 256;  // 8 warps, one row each
constexpr int kRowsPerBlock = kThreads / kWarp;
constexpr int kPack = 4;  // elements per lane and load on the packed path

template <class T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

// V consecutive elements at p (aligned to V elements on the packed path) as fp32.
template <int V, class T>
__device__ __forceinline__ void load_pack(const T* p, float* out) {
  const Pack<T, V> pk = *reinterpret_cast<const Pack<T, V>*>(p);
#pragma unroll
  for (int i = 0; i < V; ++i) out[i] = load(&pk.v[i]);
}

template <int V, class T>
__device__ __forceinline__ void store_pack(T* p, const float* in) {
  Pack<T, V> pk;
#pragma unroll
  for (int i = 0; i < V; ++i) store(&pk.v[i], in[i]);
  *reinterpret_cast<Pack<T, V>*>(p) = pk;
}

__device__ __forceinline__ int64_t warp_row() {
  return static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
}

// rows[m] = x[slot[m] / k].
template <int V, class TT, class TR>
__global__ void permute_forward_kernel(const TT* x, const int64_t* slot, int64_t M, int64_t k,
                                       int64_t C, TR* rows) {
  const int64_t m = warp_row();
  if (m >= M) return;
  const TT* src = x + moe_row_token(slot[m], k) * C;
  TR* dst = rows + m * C;
  float f[V];
  for (int64_t c = static_cast<int64_t>(threadIdx.x % kWarp) * V; c < C; c += kWarp * V) {
    load_pack<V>(src + c, f);
    store_pack<V>(dst + c, f);
  }
}

// out[n] = sum_j w[n, j] rows[inv[n, j]], slots in order; w null: unit weights (the permute's
// backward, dx[n] = sum_j drows[inv[n, j]]).
template <int V, class TT, class TR>
__global__ void slot_sum_kernel(const TR* rows, const float* w, const int64_t* inv, int64_t N,
                                int64_t k, int64_t C, TT* out) {
  const int64_t n = warp_row();
  if (n >= N) return;
  const int64_t* inv_n = inv + n * k;
  float acc[V], f[V];
  for (int64_t c = static_cast<int64_t>(threadIdx.x % kWarp) * V; c < C; c += kWarp * V) {
#pragma unroll
    for (int i = 0; i < V; ++i) acc[i] = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t m = inv_n[j];
      if (!moe_slot_kept(m)) continue;
      load_pack<V>(rows + m * C + c, f);
      if (w) {
#pragma unroll
        for (int i = 0; i < V; ++i) acc[i] = moe_combine_add(acc[i], w[n * k + j], f[i]);
      } else {
#pragma unroll
        for (int i = 0; i < V; ++i) acc[i] = moe_gather_add(acc[i], f[i]);
      }
    }
    store_pack<V>(out + n * C + c, acc);
  }
}

// d_out_rows[inv[n, j]] = w[n, j] dy[n]; dw[n, j] = dot(dy[n], out_rows[inv[n, j]]).
template <int V, class TT, class TR>
__global__ void combine_backward_kernel(const TR* out_rows, const float* w, const int64_t* inv,
                                        const TT* dy, int64_t N, int64_t k, int64_t C,
                                        TR* d_out_rows, float* dw) {
  const int64_t n = warp_row();
  const int lane = threadIdx.x % kWarp;
  if (n >= N) return;
  const TT* dyr = dy + n * C;
  float g[V], f[V], d[V];
  for (int64_t j = 0; j < k; ++j) {
    const int64_t m = inv[n * k + j];
    if (!moe_slot_kept(m)) {
      if (lane == 0) dw[n * k + j] = 0.0f;
      continue;
    }
    const float wj = w[n * k + j];
    float dot = 0.0f;
    for (int64_t c = static_cast<int64_t>(lane) * V; c < C; c += kWarp * V) {
      load_pack<V>(dyr + c, g);  // re-read per slot: the row stays in L1
      load_pack<V>(out_rows + m * C + c, f);
#pragma unroll
      for (int i = 0; i < V; ++i) {
        dot += moe_weight_grad_term(g[i], f[i]);
        d[i] = moe_combine_row_grad(wj, g[i]);
      }
      store_pack<V>(d_out_rows + m * C + c, d);
    }
    dot = warp_sum(dot);
    if (lane == 0) dw[n * k + j] = dot;
  }
}

unsigned blocks_for(int64_t rows) {
  return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
}

bool aligned(const void* p, int64_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

int64_t element_size(ElementType t) { return t == ElementType::kBFloat16 ? 2 : 4; }

// Whether rows of C elements at these pointers take the packed path: C a multiple of kPack and
// every row start aligned to a whole pack of its type.
// `rows_too`: a second rows-side array (the combine's backward reads one and writes another).
bool packed(int64_t C, MoeRowTypes t, const void* tokens, const void* rows,
            const void* rows_too = nullptr) {
  const int64_t tb = kPack * element_size(t.tokens), rb = kPack * element_size(t.rows);
  return C % kPack == 0 && aligned(tokens, tb) && aligned(rows, rb) && aligned(rows_too, rb);
}

// Calls f(pack, tokens, rows): pack an std::integral_constant of the elements per lane (kPack,
// or 1 where `pack` is false), tokens and rows null pointers of the C++ element types.
template <class F>
void with_layout(MoeRowTypes t, bool pack, F&& f) {
  auto by_pack = [&](auto* tokens, auto* rows) {
    if (pack) {
      f(std::integral_constant<int, kPack>{}, tokens, rows);
    } else {
      f(std::integral_constant<int, 1>{}, tokens, rows);
    }
  };
  auto by_rows = [&](auto* tokens) {
    if (t.rows == ElementType::kBFloat16) {
      by_pack(tokens, static_cast<__nv_bfloat16*>(nullptr));
    } else {
      by_pack(tokens, static_cast<float*>(nullptr));
    }
  };
  if (t.tokens == ElementType::kBFloat16) {
    by_rows(static_cast<__nv_bfloat16*>(nullptr));
  } else {
    by_rows(static_cast<float*>(nullptr));
  }
}

template <class P>
using Elem = std::remove_pointer_t<P>;

// The slot sums of the combine's forward (w given) and the permute's backward (w null).
void slot_sum(const void* rows, const float* w, const int64_t* inv, int64_t N, int64_t k, int64_t C,
              MoeRowTypes types, void* out, void* stream, const char* what) {
  if (N == 0 || C == 0) return;
  with_layout(types, packed(C, types, out, rows), [&](auto pack, auto* tt, auto* tr) {
    slot_sum_kernel<decltype(pack)::value><<<blocks_for(N), kThreads, 0, as_stream(stream)>>>(
        static_cast<const Elem<decltype(tr)>*>(rows), w, inv, N, k, C,
        static_cast<Elem<decltype(tt)>*>(out));
  });
  check_launch(what);
}

}  // namespace moe
}  // namespace

void moe_permute_forward_cuda(const void* x, const int64_t* slot, int64_t M, int64_t k, int64_t C,
                              MoeRowTypes types, void* rows, void* stream) {
  if (M == 0 || C == 0) return;
  moe::with_layout(types, moe::packed(C, types, x, rows), [&](auto pack, auto* tt, auto* tr) {
    moe::permute_forward_kernel<decltype(pack)::value>
        <<<moe::blocks_for(M), moe::kThreads, 0, moe::as_stream(stream)>>>(
            static_cast<const moe::Elem<decltype(tt)>*>(x), slot, M, k, C,
            static_cast<moe::Elem<decltype(tr)>*>(rows));
  });
  moe::check_launch("moe_permute_forward");
}

void moe_permute_backward_cuda(const void* drows, const int64_t* inv, int64_t N, int64_t k,
                               int64_t C, MoeRowTypes types, void* dx, void* stream) {
  moe::slot_sum(drows, nullptr, inv, N, k, C, types, dx, stream, "moe_permute_backward");
}

void moe_combine_forward_cuda(const void* out_rows, const float* w, const int64_t* inv, int64_t N,
                              int64_t k, int64_t C, MoeRowTypes types, void* y, void* stream) {
  moe::slot_sum(out_rows, w, inv, N, k, C, types, y, stream, "moe_combine_forward");
}

void moe_combine_backward_cuda(const void* out_rows, const float* w, const int64_t* inv,
                               const void* dy, int64_t N, int64_t k, int64_t C, MoeRowTypes types,
                               void* d_out_rows, float* dw, void* stream) {
  if (N == 0) return;
  const bool pack = moe::packed(C, types, dy, out_rows, d_out_rows);
  moe::with_layout(types, pack, [&](auto v, auto* tt, auto* tr) {
    using TR = moe::Elem<decltype(tr)>;
    moe::combine_backward_kernel<decltype(v)::value>
        <<<moe::blocks_for(N), moe::kThreads, 0, moe::as_stream(stream)>>>(
            static_cast<const TR*>(out_rows), w, inv,
            static_cast<const moe::Elem<decltype(tt)>*>(dy), N, k, C, static_cast<TR*>(d_out_rows),
            dw);
  });
  moe::check_launch("moe_combine_backward");
}

}  // namespace lmtrain::kernels
