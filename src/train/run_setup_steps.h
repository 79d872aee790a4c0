// The steps of set_up_run (train/run_setup.h) that live in files of their own: the model and its
// optimizer (run_build.cpp), and where the run starts, a resumed checkpoint or initial weights
// (run_start.cpp). Internal to set_up_run.
#pragma once
#include <optional>

#include "checkpoint/checkpoint_store.h"
#include "core/runtime.h"
#include "distributed/group.h"
#include "train/run_setup.h"

namespace lmtrain::train {

// The model (with its experts placed), the objective, the flat trained parameters, the
// optimizer and the schedule. ZeRO-3 over several ranks builds nothing whole where it can
// (parallel/sharded_init.h): then s.flat is born sharded (shard_only()) and holds this rank's
// initial weights; resume_or_init reads model.init_from into it by range.
void build_model_and_optimizer(RunSetup& s, const std::optional<LoadedCheckpoint>& temporal_lm,
                               dist::Group& group, const core::Runtime& rt, dist::Group* tp);

// A resumed checkpoint (checkpoint.resume), else model.init_from's initial weights.
void resume_or_init(RunSetup& s, dist::Group& group);

}  // namespace lmtrain::train
