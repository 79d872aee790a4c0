// Launchers of the MoE row moves (kernels/cuda/moe_rows.cu), compiled only in builds with CUDA
// (LMTRAIN_CUDA_KERNELS). Each mirrors its CPU reference in kernels/moe_rows_reference.h: same
// arguments, same per-row math (kernels/moe_rows_math.h), on device pointers and a CUDA stream.
// Deterministic: every output element is written by one thread, its sums run in a fixed order,
// and nothing is accumulated with atomics.
//
// No torch and no CUDA headers (model/fused_moe_rows.cpp owns the tensors). Two element types:
// `tokens` for the (N, C) side (x, dx, y, dy) and `rows` for the expert-sorted (M, C) side
// (rows, their gradient, the experts' outputs and theirs), so that the permute can cast x to the
// experts' compute type as it moves it (autocast) and the combine can read bf16 expert outputs
// into an fp32 stream. slot (M), inv (N k) int64; the gate weights w and dw (N, k) are fp32.
#pragma once
#include <cstdint>

#include "kernels/fused_cuda.h"

namespace lmtrain::kernels {

struct MoeRowTypes {
  ElementType tokens, rows;
};

// rows[m] = x[slot[m] / k]: x (N, C) -> rows (M, C).
void moe_permute_forward_cuda(const void* x, const int64_t* slot, int64_t M, int64_t k, int64_t C,
                              MoeRowTypes types, void* rows, void* stream);
// dx[n] = sum_j drows[inv[n, j]]: drows (M, C) -> dx (N, C).
void moe_permute_backward_cuda(const void* drows, const int64_t* inv, int64_t N, int64_t k,
                               int64_t C, MoeRowTypes types, void* dx, void* stream);
// y[n] = sum_j w[n, j] out_rows[inv[n, j]]: out_rows (M, C) -> y (N, C).
void moe_combine_forward_cuda(const void* out_rows, const float* w, const int64_t* inv, int64_t N,
                              int64_t k, int64_t C, MoeRowTypes types, void* y, void* stream);
// dy (N, C) -> d_out_rows (M, C), dw (N, k).
void moe_combine_backward_cuda(const void* out_rows, const float* w, const int64_t* inv,
                               const void* dy, int64_t N, int64_t k, int64_t C, MoeRowTypes types,
                               void* d_out_rows, float* dw, void* stream);

}  // namespace lmtrain::kernels
