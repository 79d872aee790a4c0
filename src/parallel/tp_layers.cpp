#include "parallel/tp_layers.h"

#include <ATen/ATen.h>

#include "core/error.h"
#include "parallel/tp_regions.h"

namespace lmtrain::train {

at::Tensor shard_of(const at::Tensor& whole, int64_t dim, int rank, int ranks) {
  if (whole.size(dim) % ranks != 0) {
    throw UsageError("tensor parallel: a weight of shape " + std::to_string(whole.size(0)) + " x " +
                     std::to_string(whole.dim() > 1 ? whole.size(1) : 1) + " does not split " +
                     std::to_string(ranks) + " ways along dimension " + std::to_string(dim) +
                     " (dist.tp must divide the heads, the MLP width and the vocabulary)");
  }
  return whole.chunk(ranks, dim)[rank];
}

at::Tensor column_parallel_linear(const at::Tensor& x, const at::Tensor& weight_shard,
                                  const at::Tensor& bias_shard, dist::Group& group,
                                  bool sequence_parallel) {
  const auto input = sequence_parallel ? gather_sequence(x, 1, group) : copy_to_tp(x, group);
  return at::linear(input, weight_shard, bias_shard);  // (.., out / T)
}

at::Tensor row_parallel_linear(const at::Tensor& x, const at::Tensor& weight_shard,
                               const at::Tensor& bias, dist::Group& group, bool sequence_parallel) {
  const auto partial = at::linear(x, weight_shard);  // (.., out): this rank's share of the sum
  auto y = sequence_parallel ? scatter_sequence(partial, 1, group) : reduce_from_tp(partial, group);
  return bias.defined() ? y + bias : y;  // once, after the sum
}

at::Tensor vocab_parallel_embedding(const at::Tensor& ids, const at::Tensor& table_shard,
                                    dist::Group& group, bool sequence_parallel) {
  const int64_t rows = table_shard.size(0), begin = rows * group.rank();
  // Ids outside this rank's rows look up row 0 and are zeroed: (B, T_seq, C).
  const auto mine = (ids >= begin) & (ids < begin + rows);
  const auto local = at::where(mine, ids - begin, at::zeros_like(ids));
  const auto rows_out =
      at::embedding(table_shard, local) * mine.unsqueeze(-1).to(table_shard.dtype());
  return sequence_parallel ? scatter_sequence(rows_out, 1, group) : reduce_from_tp(rows_out, group);
}

}  // namespace lmtrain::train
