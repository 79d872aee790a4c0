// ZeRO-3's sharded set-up (issue 42: models bigger than one device). Over N > 1 ranks no rank
// ever holds the whole model, set-up included: the model is built unwritten on the CPU
// (GptImpl's init=false: never-touched memory, no page committed; parameters stay on the CPU
// even for a GPU run), the flat layout is made without a whole buffer
// (optim::ShardOnly: this rank's zeroed shard on the device), and the initial weights are
// written parameter by parameter into that shard here (or read by range from model.init_from,
// train/init_from_shard.h; a LoRA base's frozen pieces are read when FrozenShard makes its shard,
// parallel::FrozenSource); FullyShard then points every parameter into its unit's buffer, on
// the device, whose memory exists only while the unit is gathered. On a GPU the device holds
// only the shards (and one unit at a time once training); on the host one parameter's scratch
// at a time is committed. (The unwritten model is address space only: a host with
// vm.overcommit_memory=2 counts it against its commit limit, where building on libtorch's meta
// device, not reachable from these module constructors today, would be the way.)
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <utility>

#include "model/gpt.h"
#include "optim/flat_params.h"

namespace lmtrain::parallel {

// Elements [begin, end) of segment `seg` (relative to its start) that this rank holds: its
// part in the shard, or all of it in a kept expert region; begin == end when none.
std::pair<int64_t, int64_t> held_part(const optim::FlatParams& flat,
                                      const optim::ParamSegment& seg);

// Elements [first, first + values.numel()) of segment `seg`, flattened row-major (any dtype,
// any device), written where this rank holds them; the rest is ignored.
void write_segment_part(optim::FlatParams& flat, const optim::ParamSegment& seg, int64_t first,
                        const at::Tensor& values);

// Writes `model`'s initial weights into the ShardOnly `flat` made over it: the draws of
// GptImpl::init_weights (model/param_init.h), in its order, from the global CPU generator (seed
// it first, as build_model's caller does), each parameter into a CPU scratch tensor of its
// shape whose held part is copied and which is freed at once: bit for bit the weights of a
// whole-model build, at most one parameter's scratch beside the shard. Parameters outside the
// layout (a LoRA base's frozen ones: their values come from model.init_from, into FrozenShard)
// are drawn too, so the generator ends where a whole build leaves it; LoRA adapters last.
// Segments that are not the model's (an objective's, named "objective.*") are copied from
// their own tensors, which are real. Collective-free.
// draw_model false: nothing is drawn (a temporal run's frozen LM without LoRA, which a whole
// build leaves undrawn too); only the objective's segments are written, the model's left for
// the caller to read from the LM's file (train/init_from_shard.h).
void init_shard_from_seed(model::GptImpl& model, optim::FlatParams& flat, bool draw_model = true);

// The model's buffers (MoE expert biases: small, real) to `device`; its parameters stay where
// they are until FullyShard points them into their units.
void place_model_buffers(model::GptImpl& model, const c10::Device& device);

}  // namespace lmtrain::parallel
