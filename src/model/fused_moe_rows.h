// The token rows of an MoE layer into expert order and back (kernels: moe_rows): the permute
// before the experts and the weighted combine ("unpermute") after them.
//
// libtorch's path (`*_unfused`, the default until a GPU run proves the kernels) gathers with
// index_select, whose CUDA backward is an atomic index_add_ (not deterministic), and combines in
// about six passes over the (M, C) rows: a cast to fp32, the multiply by the gate weight, a cast
// back, a zero-filled (N k, C) buffer, an index_copy into it and a sum over the k slots. The
// fused path reads and writes each row once each way, sums in fp32 in slot order (no atomics),
// and under autocast stores the permuted rows in the experts' compute type (the cast their GEMM
// would make next).
//
// Shapes: N tokens, top-k, M = plan.token.size(0) kept assignments, C columns.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>

#include "model/moe_routing.h"

namespace lmtrain::model {

// flat (N, C) -> rows (M, C) sorted by expert: rows[m] = flat[plan.token[m]]. The fused kernel
// runs when it is switched on for flat's device (kernels/kernel_switch.h) and the types fit
// (fp32 or bf16); its rows are then in autocast's dtype when autocast is on for the device.
at::Tensor moe_permute(const at::Tensor& flat, const DispatchPlan& plan, int64_t top_k);

// out_rows (M, C) expert outputs, weight (N, k) fp32 gate weights -> y (N, C) in `dtype`:
// y[n] = sum_j weight[n, j] * out_rows[row of (n, j)], dropped assignments adding nothing.
at::Tensor moe_combine(const at::Tensor& out_rows, const at::Tensor& weight,
                       const DispatchPlan& plan, at::ScalarType dtype);

// The libtorch paths (tests hold the kernels to them).
at::Tensor moe_permute_unfused(const at::Tensor& flat, const DispatchPlan& plan);
at::Tensor moe_combine_unfused(const at::Tensor& out_rows, const at::Tensor& weight,
                               const DispatchPlan& plan, at::ScalarType dtype);

// Whether moe_permute / moe_combine take the kernels for these operands.
bool moe_permute_fused(const at::Tensor& flat);
bool moe_combine_fused(const at::Tensor& out_rows, const at::Tensor& weight, at::ScalarType dtype);

// (N k) int64: the sorted row of each assignment (token n, slot j) at n k + j, -1 when dropped.
at::Tensor moe_inverse_rows(const DispatchPlan& plan, int64_t assignments);

}  // namespace lmtrain::model
