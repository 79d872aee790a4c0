// One linear layer per expert over tokens sorted by expert: rows [o_e, o_e + n_e) of x go
// through expert e's weight. Runs as one grouped GEMM (at::_grouped_mm: CPU fp32, CUDA bf16)
// where its layout rules hold, else as one GEMM per non-empty group; backward likewise (dX is a
// grouped GEMM with the untransposed weights, dW one with offsets along the reduction dim).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace lmtrain::model {

// x (M, in) with rows sorted by expert, w (E, out, in), counts[e] = rows of expert e
// (sum = M, host values). Returns (M, out): y[rows of e] = x[rows of e] @ w[e]^T.
at::Tensor grouped_linear(const at::Tensor& x, const at::Tensor& w,
                          const std::vector<int64_t>& counts);

// Whether grouped_linear takes the single grouped-GEMM path for these operands (else the loop).
bool grouped_mm_supported(const at::Tensor& x, const at::Tensor& w);

}  // namespace lmtrain::model
