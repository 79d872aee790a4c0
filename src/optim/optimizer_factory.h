// Picks the optimizer for a config and world size: optim.name (adamw) and dist.zero (0, 1, 2).
// The same config runs at any world size, single process included.
#pragma once
#include <memory>

#include "core/config_choice.h"
#include "distributed/group.h"
#include "optim/flat_params.h"
#include "optim/optimizer.h"

namespace lmtrain::optim {

// optim.name, in the order of its choices (core/config_choice.h).
enum class OptimizerName { kAdamW, kMuon };
constexpr core::ChoiceKey choice_key(OptimizerName) { return {"optim.name", 2}; }

// FlatParams padding for this config: 16 * world size when the optimizer shards the flat
// buffers (so they split evenly into aligned shards), else 16.
int64_t flat_pad_multiple(const core::Config& cfg, int world_size);

// expert_group: the EP group under expert parallelism (dist.ep > 1), else null: the flat
// buffers' expert region then holds this rank's experts (AdamW and ZeroAdamW; Muon refuses).
std::unique_ptr<Optimizer> make_optimizer(const core::Config& cfg, FlatParams& flat,
                                          dist::Group& group, dist::Group* expert_group = nullptr);

}  // namespace lmtrain::optim
