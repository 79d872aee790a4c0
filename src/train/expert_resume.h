// A resume under expert parallelism (dist.ep > 1) from a checkpoint saved in the same EP layout
// (checkpoint/sharded_save.h: each EP rank's experts in its own model.ep<e> / optim.ep<e>): each
// rank reads only its own experts' slices, by range, and the shared tensors whole; other
// checkpoints are loaded whole and their stacks narrowed to this rank's experts as before.
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
