// Cross-entropy over logits split by vocabulary (the LM head column-parallel over V): each of
// the T ranks holds logits (N, V / T) for its rows of the vocabulary, and the full (N, V) is never
// gathered. Three all-reduces of N numbers each stand in for it (Megatron-LM's
// vocab_parallel_cross_entropy): the row max (MAX), the sum of exp(logit - max) (SUM), and the
// target's logit from the rank that holds it (SUM); loss_i = log(sum) + max - target_logit.
// Backward is softmax - one_hot on each rank's columns, with no communication.
#pragma once
#include <ATen/core/Tensor.h>

#include "distributed/group.h"

namespace lmtrain::train {

// logits_shard (N, V / T), targets (N,) int64 of the whole vocabulary (ignore_index: no loss,
// no gradient) -> the mean loss over the targets that count (a scalar); 0 when none does.
at::Tensor vocab_parallel_cross_entropy(const at::Tensor& logits_shard, const at::Tensor& targets,
                                        dist::Group& group, int64_t ignore_index = -1);

}  // namespace lmtrain::train
