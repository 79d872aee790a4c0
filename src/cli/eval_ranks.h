// `lmtrain eval --bpb / --tasks / --chat_tasks` on several ranks (torchrun, `lmtrain launch`,
// mpirun, Slurm: distributed/env.h): each rank scores its share of the items (eval/item_shard.h)
// and the shares are summed over a Gloo group, so every rank holds what one rank alone would
// have scored; rank 0 prints and writes the JSON.
#pragma once
#include <memory>

#include "core/runtime.h"
#include "distributed/group.h"
#include "eval/bpb.h"
#include "eval/chat_tasks.h"
#include "eval/core_eval.h"

namespace lmtrain::cli {

struct EvalRanks {
  std::unique_ptr<dist::Group> group;  // the single-rank group when not launched on several
  eval::ItemShard shard;
  bool lead() const { return shard.rank == 0; }
};

// From the process environment: rank, world and a Gloo group (CPU control tensors only; the
// model stays on its device). Ranks other than 0 go quiet but for warnings and errors.
EvalRanks eval_ranks();

// Sums the ranks' shares into every rank's result (each item's score comes from the rank that
// owns it, the others contribute zeros), then finishes the totals (bpb, accuracy, centered).
void sum_over_ranks(eval::BpbResult& r, dist::Group& group);
void sum_over_ranks(eval::TaskScore& ts, dist::Group& group);
void sum_over_ranks(eval::ChatTaskScore& ts, dist::Group& group);

}  // namespace lmtrain::cli
