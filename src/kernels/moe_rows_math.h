// The per-row math of the MoE row moves (kernels/cuda/moe_rows.cu), shared word for word with
// their CPU references (kernels/moe_rows_reference.h), as kernels/fused_math.h is for the other
// fused kernels.
//
// An MoE layer of N tokens and top-k routing has N k assignments; assignment (token n, slot j)
// has the flat index s = n k + j. plan_dispatch (model/moe_routing.h) keeps M <= N k of them and
// sorts them by expert: sorted row m holds assignment slot[m]. The kernels read that map both
// ways:
// - slot (M): the assignment of sorted row m, its token slot[m] / k (moe_row_token);
// - inv (N k): the sorted row of each assignment, or -1 for one dropped by capacity
//   (moe_slot_kept).
// Every reduction runs over one token's k slots in slot order (a fixed order: no atomics, the
// same bits on every run) or over one row's C columns, in fp32; stores round to the element type
// (store_round).
//
// No torch and no CUDA headers: this file compiles as plain C++ and under nvcc.
#pragma once
#include <cstdint>

#include "kernels/fused_math.h"

namespace lmtrain::kernels {

// The token of assignment `slot` under top-k routing.
LMTRAIN_HD int64_t moe_row_token(int64_t slot, int64_t k) { return slot / k; }

// Whether inv's entry names a sorted row (the assignment was kept).
LMTRAIN_HD bool moe_slot_kept(int64_t row) { return row >= 0; }

// Permute backward, one element of dx[n]: the gradients of the token's kept rows, summed in slot
// order: acc starts at 0 and takes drows[inv[n, j]][c] for j = 0 .. k-1.
LMTRAIN_HD float moe_gather_add(float acc, float drow) { return acc + drow; }

// Combine forward, one element of y[n] = sum_j w[n, j] * out_rows[inv[n, j]], in slot order.
LMTRAIN_HD float moe_combine_add(float acc, float w, float out) { return acc + w * out; }

// Combine backward: d out_rows[m][c] = w[n, j] * dy[n][c] for the row m = inv[n, j], and
// dw[n, j] = sum_c dy[n][c] * out_rows[m][c] (a row sum: by a loop on the CPU, a warp on the GPU).
LMTRAIN_HD float moe_combine_row_grad(float w, float dy) { return w * dy; }
LMTRAIN_HD float moe_weight_grad_term(float dy, float out) { return dy * out; }

}  // namespace lmtrain::kernels
