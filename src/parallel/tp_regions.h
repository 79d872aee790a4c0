// The four crossings of a tensor-parallel region (Megatron-LM's f and g, and their sequence-
// parallel forms), as autograd functions over a dist::Group of T ranks. Each pairs a collective
// in one direction with its adjoint in the other, so a layer built from them is differentiable
// end to end and model code never calls a collective itself:
//
//   copy_to_tp            forward: identity            backward: all-reduce (sum)
//   reduce_from_tp        forward: all-reduce (sum)    backward: identity
//   gather_sequence       forward: all-gather on dim   backward: reduce-scatter on dim
//   scatter_sequence      forward: reduce-scatter      backward: all-gather on dim
//   gather_last_dim       forward: all-gather on -1    backward: this rank's slice of -1
//   shift_sequence_right  forward: the previous rank's last position (a halo; all-gather of one
//                         position)                    backward: its gradient to that rank
//
// copy/reduce wrap a column-parallel layer's input and a row-parallel layer's output; with
// sequence parallelism the activations between them stay split along the sequence (dim 1 of
// (B, T, C)), and gather/scatter take their place: the same bytes as one all-reduce, split in two.
// Shapes along the split dim must divide by T.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>

#include "distributed/group.h"

namespace lmtrain::train {

at::Tensor copy_to_tp(const at::Tensor& x, dist::Group& group);
at::Tensor reduce_from_tp(const at::Tensor& x, dist::Group& group);
// (.., n, ..) -> (.., n * T, ..): the ranks' pieces in rank order.
at::Tensor gather_sequence(const at::Tensor& x, int64_t dim, dist::Group& group);
// (.., n * T, ..) summed over the ranks -> this rank's (.., n, ..) piece.
at::Tensor scatter_sequence(const at::Tensor& x, int64_t dim, dist::Group& group);
// (.., n) -> (.., n * T), for a column-parallel output someone needs whole.
at::Tensor gather_last_dim(const at::Tensor& x, dist::Group& group);
// (.., n, ..) this rank's piece of a sequence split in rank order -> (.., n, ..): each position's
// predecessor along `dim` (nanochat's smear): the previous rank's last position for the first,
// zeros on rank 0, then this piece's first n - 1.
at::Tensor shift_sequence_right(const at::Tensor& x, int64_t dim, dist::Group& group);

// Seconds this process waited in tensor parallelism's collectives (the crossings above, the
// vocabulary-parallel loss's, the plan's gradient sums) since the last take: all of it unhidden,
// as nothing overlaps them. For the benchmarks' comm_wait_ms.
void add_tp_comm_seconds(double seconds);
double take_tp_comm_seconds();
// A blocking all-reduce over the TP group, its wait counted above (the losses' row statistics,
// fp8's amax agreement).
void timed_tp_allreduce(at::Tensor& t, dist::ReduceOp op, dist::Group& group);

}  // namespace lmtrain::train
