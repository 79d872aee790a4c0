// train.precision=fp8 under tensor parallelism: the column- and row-parallel layers of
// tp_layers.h through model/fp8_linear.h's fp8 GEMMs, with one process's scales and roundings.
//
// fp8 scales each GEMM operand by its own amax (per-tensor current scaling). A rank holds slices,
// so the operands that are slices get the whole tensor's amax from a MAX all-reduce of one fp32
// scalar over the TP group (MAX is exact: the scales, hence the fp8 values, are one process's):
//
//   column-parallel  W (out/T, in) a slice: its amax reduced in the forward, dy (M, out/T) a
//                    slice: its amax reduced in the backward. x is the gathered whole sequence.
//   row-parallel     x (M, in/T) and W (out, in/T) slices: both reduced in the forward. dy is
//                    whole (the reduce-scatter's adjoint all-gathers it).
//
// So 2 scalar all-reduces per split GEMM layer and micro-step (4 per block: c_attn, attention's
// c_proj, c_fc, the MLP's c_proj), plus the forward's 2 again for a block recomputed in backward
// (train.activation_checkpointing). The products summed over the ranks (the row-parallel y, the
// column-parallel dx) leave the GEMM in fp32 and are rounded to bf16 once, after the sum, as one
// process rounds its whole product: what is left is fp32 summation order.
#pragma once
#include <ATen/core/Tensor.h>

#include <memory>

#include "distributed/group.h"
#include "model/fp8_linear.h"

namespace lmtrain::parallel {

// One TP group's agreements: the column- and row-parallel layers' slices and partial products.
// fp8_linear reads them in the backward, so the layers' products hold them (shared_ptr).
struct TpFp8Splits {
  model::Fp8Split column, row;
};
std::shared_ptr<const TpFp8Splits> make_tp_fp8_splits(dist::Group& group);

// As train::column_parallel_linear / row_parallel_linear (sequence parallel), in fp8 where
// model::fp8_linear_supported holds for the local shapes, in the plain product elsewhere.
at::Tensor column_parallel_fp8_linear(const at::Tensor& x, const at::Tensor& weight_shard,
                                      const at::Tensor& bias_shard, dist::Group& group,
                                      const TpFp8Splits& splits);
at::Tensor row_parallel_fp8_linear(const at::Tensor& x, const at::Tensor& weight_shard,
                                   const at::Tensor& bias, dist::Group& group,
                                   const TpFp8Splits& splits);

}  // namespace lmtrain::parallel
