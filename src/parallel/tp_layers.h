// Megatron-LM's tensor-parallel layers as functions of a rank's weight shard, for a plan that
// swaps a block's linears from outside the model (torchtitan's parallelize). T = group.size().
//
//   column-parallel  W (out, in) split by rows: rank r holds W[r*out/T : (r+1)*out/T, :] and
//                    the same rows of the bias; x (.., in) whole -> y (.., out/T), this rank's
//                    output features (attention's q/k/v heads, the MLP's up and gate)
//   row-parallel     W (out, in) split by columns: rank r holds W[:, r*in/T : (r+1)*in/T];
//                    x (.., in/T) this rank's features -> y (.., out) summed over the ranks,
//                    plus the whole bias once (attention's output, the MLP's down projection)
//   vocab-parallel   a table (V, C) split by rows (the token embedding): rank r looks up the
//   embedding        ids in its range, zeros elsewhere, and the ranks' rows are summed
//
// sequence_parallel: the activations outside the pair are (B, T_seq / T, C) pieces of the
// sequence: a column-parallel layer all-gathers its input along dim 1 first and a row-parallel
// layer reduce-scatters its output along dim 1 (tp_regions.h), so norms and dropout between
// blocks run on 1/T of the tokens.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>

#include "distributed/group.h"

namespace lmtrain::train {

// Rows [begin, end) of a whole weight that rank `rank` of `ranks` holds along dim `dim`.
at::Tensor shard_of(const at::Tensor& whole, int64_t dim, int rank, int ranks);

at::Tensor column_parallel_linear(const at::Tensor& x, const at::Tensor& weight_shard,
                                  const at::Tensor& bias_shard, dist::Group& group,
                                  bool sequence_parallel);
at::Tensor row_parallel_linear(const at::Tensor& x, const at::Tensor& weight_shard,
                               const at::Tensor& bias, dist::Group& group, bool sequence_parallel);
// ids (B, T_seq) int64, table_shard (V / T, C) -> (B, T_seq, C), or (B, T_seq / T, C) pieces
// with sequence_parallel.
at::Tensor vocab_parallel_embedding(const at::Tensor& ids, const at::Tensor& table_shard,
                                    dist::Group& group, bool sequence_parallel);

}  // namespace lmtrain::train
