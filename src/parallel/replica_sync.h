// Start-up agreement of data-parallel replicas: rank 0's parameters and replicated optimizer
// state are broadcast to every rank (a sharded optimizer's state is per rank by design), then each
// rank's fingerprint (a CRC of the parameter bytes plus the step and data position) is compared
// with rank 0's, so a rank that resumed from a different checkpoint or built a different model
// fails loudly at step 0 instead of drifting silently.
#pragma once
#include "checkpoint/training_checkpoint.h"
#include "distributed/group.h"
#include "optim/flat_params.h"
#include "optim/optimizer.h"

namespace lmtrain::train {

// `expert_replicas` (expert parallelism): the expert region of the flat buffers
// [flat.expert_begin(), numel) differs between EP ranks, so it is broadcast within this group
// (the ranks holding the same experts) and left out of the fingerprint.
void sync_replicas(dist::Group& group, const optim::FlatParams& flat, const optim::Optimizer& opt,
                   const TrainingState& state, dist::Group* expert_replicas = nullptr);

}  // namespace lmtrain::train
