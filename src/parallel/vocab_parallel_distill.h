// Distillation's loss (model/distill_loss.h) over logits split by vocabulary, for a student under
// tensor parallelism (tensor_parallel_plan.h): each of the T ranks holds the student's logits
// (N, V / T) of its vocabulary rows, and the teacher's logits of the same rows, and neither
// model's (N, V) is ever whole. The softmaxes at temperature T are made of all-reduces of N
// numbers each, as vocab_parallel_loss.h's cross-entropy:
//
//   student  row max (MAX), sum of exp (SUM)      -> log p_s on this rank's columns
//   teacher  row max (MAX), sum of exp (SUM)      -> p_t, log p_t on this rank's columns
//   kd rows  sum_v p_t (log p_t - log p_s) (SUM)  -> kd = T^2 mean over the rows with a target
//   ce       vocab_parallel_cross_entropy (its own three)
//
// so 8 all-reduces of N floats per micro-step. Backward, on this rank's columns and with no
// communication: d kd / d z_s = T (p_s - p_t) / n.
//
// The teacher runs replicated: every TP rank holds it whole and computes its final hidden states
// for the whole sequence (no gradient), then only its head's rows of this rank's vocabulary. A
// teacher split by the plan would scale past one device but needs its slices loaded from a
// checkpoint by range; replicated, the student's set-up is unchanged and the teacher costs T
// times its forward FLOPs over the TP group.
#pragma once
#include <ATen/core/Tensor.h>

#include "distributed/group.h"
#include "model/distill_loss.h"

namespace lmtrain::parallel {

// hs_shard: the student's final hidden states, this rank's positions (B, T_seq / T, Cs)
// (differentiable); ws_rows: its head's rows of this rank's vocabulary (V / T, Cs); ht: the
// teacher's final hidden states (B, T_seq, Ct), whole; wt: its head (V, Ct), whole; targets
// (B, T_seq) with model::kIgnoreIndex where no target counts. Means over the counted targets;
// the same loss on every TP rank.
model::DistillLoss vocab_parallel_distill_loss(const at::Tensor& hs_shard,
                                               const at::Tensor& ws_rows, const at::Tensor& ht,
                                               const at::Tensor& wt, const at::Tensor& targets,
                                               const model::DistillLossSpec& spec,
                                               dist::Group& group);

}  // namespace lmtrain::parallel
