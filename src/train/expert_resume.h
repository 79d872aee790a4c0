// A resume under expert parallelism (dist.ep > 1) from a sharded checkpoint
// (checkpoint/sharded_save.h) reads, by range, only this rank's experts of each stack (and the
// shared tensors whole): saved at the same dist.ep, its own slices (model.ep<e> / optim.ep<e>);
// at another dist.ep, or by ZeRO-3 at dist.ep=1, its rows of the saved slices or flat ranges.
// An unsharded checkpoint is loaded whole and its stacks narrowed to this rank's experts.
#pragma once
#include <nlohmann/json.hpp>

#include "checkpoint/sharded_reader.h"
#include "model/gpt.h"

namespace lmtrain::train {

// Whether checkpoint `meta` holds this run's experts as slices of its own: a sharded checkpoint
// saved at the same dist.ep (`ep`).
bool saved_in_ep_layout(const nlohmann::json& meta, int64_t ep);

// Rows [first, first + count) of dim 0 of each of the model's expert stacks (whole shape: its
// local one with dim 0 times `ep`), for sharded_reader.h's reads by range; this rank is EP rank
// `ep_rank` of `ep`.
TensorLocalizer ep_localizer(const model::GptImpl& model, int64_t ep_rank, int64_t ep);

}  // namespace lmtrain::train
