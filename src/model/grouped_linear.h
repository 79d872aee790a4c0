// One linear layer per expert over tokens sorted by expert: rows [o_e, o_e + n_e) of x go
// through expert e's weight. Runs as one grouped GEMM (at::_grouped_mm: CPU fp32, CUDA bf16)
// where its layout rules hold, else as one GEMM per non-empty group; backward likewise (dX is a
// grouped GEMM with the untransposed weights, dW one with offsets along the reduction dim).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "model/expert_groups.h"

namespace lmtrain::model {

// x (M, in) with rows sorted by expert, w (E, out, in), groups: rows of each expert (sum = M).
// Returns (M, out): y[rows of e] = x[rows of e] @ w[e]^T. The grouped GEMM reads the groups'
// device offsets (no host read); the per-group loop reads their host counts.
at::Tensor grouped_linear(const at::Tensor& x, const at::Tensor& w, const ExpertGroups& groups);

// Whether grouped_linear takes the single grouped-GEMM path for these operands (else the loop).
bool grouped_mm_supported(const at::Tensor& x, const at::Tensor& w);

}  // namespace lmtrain::model
