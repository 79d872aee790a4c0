// Picks the optimizer for its options and world size: optim.name (adamw) and dist.zero (0-3).
// The same config runs at any world size, single process included.
#pragma once
#include <memory>

#include "core/config_choice.h"
#include "core/config_schema.h"
#include "distributed/group.h"
#include "optim/adamw.h"
#include "optim/flat_params.h"
#include "optim/muon.h"
#include "optim/optimizer.h"

namespace lmtrain::optim {

// optim.name, in the order of its choices (core/config_choice.h).
enum class OptimizerName { kAdamW, kMuon };
constexpr core::ChoiceKey choice_key(OptimizerName) { return {"optim.name", 2}; }

// The optimizer of a run, typed (read from optim.* and dist.zero by the command,
// cli/read_options.cpp).
struct OptimizerOptions {
  OptimizerName name = core::default_choice<OptimizerName>();
  // dist.zero: 0 replicated, 1 / 2 sharded AdamW state (and gradients), 3 parameters too.
  int zero = static_cast<int>(core::default_int("dist.zero"));
  // ZeRO-3 (parallel/fully_shard.h): dist.reshard_after_forward, and dist.shard_group_size
  // (HSDP: shard within groups of this many ranks, replicate across them; 0 = the world).
  bool reshard_after_forward = core::default_bool("dist.reshard_after_forward");
  int shard_group_size = static_cast<int>(core::default_int("dist.shard_group_size"));
  // optim.lr: the base peak rate (Muon scales its groups' rates from it).
  double lr = core::default_float("optim.lr");
  AdamWOptions adamw;  // AdamW, and Muon's AdamW group
  MuonOptions muon;    // optim.name = muon only
};

// FlatParams padding for these options: 16 * world size when the optimizer shards the flat
// buffers (so they split evenly into aligned shards), else 16.
// `world_size`: the ranks the buffers are sharded over (under HSDP, the shard group's).
int64_t flat_pad_multiple(const OptimizerOptions& opts, int world_size);
// FlatParams' gradient buffer for these options: none under ZeRO-3 over several ranks
// (FullyShard's unit buffers and the shard hold the gradients), else whole.
GradBuffer flat_grad_buffer(const OptimizerOptions& opts, int world_size);

// expert_group: the EP group under expert parallelism (dist.ep > 1), else null: the flat
// buffers' expert region then holds this rank's experts (AdamW and ZeroAdamW; Muon refuses).
std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& opts, FlatParams& flat,
                                          dist::Group& group, dist::Group* expert_group = nullptr);

}  // namespace lmtrain::optim
