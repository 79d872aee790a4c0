// CPU references of the MoE row moves (kernels/cuda/moe_rows.cu): the permute of an MoE layer's
// token rows into expert order and the weighted combine back (the "unpermute"), forward and
// backward. Same per-row math (kernels/moe_rows_math.h), same order of sums and roundings as the
// kernels, on fp32 arrays: with a `bf16` flag set they round every value the kernel stores in
// bf16. Tests hold them to libtorch's index_select / index_copy / sum path (forward) and its
// autograd (backward); on a GPU the kernels are held to that path on the device (tests/cuda).
//
// Shapes: N tokens, top-k, M kept assignments (sorted rows), C columns. slot (M) and inv (N k)
// are the map of kernels/moe_rows_math.h. Plain C++ on raw pointers, no torch headers.
#pragma once
#include <cstdint>

namespace lmtrain::kernels {

// ---- Permute: rows[m] = x[slot[m] / k] -----------------------------------------------------
// x: (N, C) -> rows: (M, C). A copy (bf16 values stay bf16 values: no rounding to apply).
void moe_permute_forward_reference(const float* x, const int64_t* slot, int64_t M, int64_t k,
                                   int64_t C, float* rows);
// drows: (M, C) -> dx: (N, C), dx[n] = sum_j drows[inv[n, j]] over kept slots in slot order
// (zeros for a token with none); bf16: dx is stored in bf16.
void moe_permute_backward_reference(const float* drows, const int64_t* inv, int64_t N, int64_t k,
                                    int64_t C, bool bf16, float* dx);

// ---- Combine: y[n] = sum_j w[n, j] * out_rows[inv[n, j]] ----------------------------------
// out_rows: (M, C), w: (N, k) fp32 gate weights -> y: (N, C); bf16_y: y is stored in bf16.
void moe_combine_forward_reference(const float* out_rows, const float* w, const int64_t* inv,
                                   int64_t N, int64_t k, int64_t C, bool bf16_y, float* y);
// dy: (N, C) -> d_out_rows (M, C) = w * dy of each row's token (stored in bf16 with bf16_rows),
// dw (N, k) fp32 = dot(dy[n], out_rows[inv[n, j]]), 0 for a dropped slot.
void moe_combine_backward_reference(const float* out_rows, const float* w, const int64_t* inv,
                                    const float* dy, int64_t N, int64_t k, int64_t C,
                                    bool bf16_rows, float* d_out_rows, float* dw);

}  // namespace lmtrain::kernels
