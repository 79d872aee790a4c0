// Shared by `train` and `bench`: find this process's place in the job (distributed/env.h), set up
// the console for it, pick its runtime (device, precision) and build its dist::Group.
#pragma once
#include <memory>

#include "core/config.h"
#include "core/runtime.h"
#include "distributed/env.h"
#include "distributed/group.h"

namespace lmtrain::cli {

struct DistSetup {
  dist::DistEnv env;
  core::Runtime runtime;  // this rank's device (cuda:LOCAL_RANK) and precision
  std::unique_ptr<dist::Group> group;
};

// This rank's runtime from train.device, train.precision, train.grad_reduce_dtype and train.tf32.
// Throws UsageError naming the key: train.device=cuda without a visible GPU or in a build without
// CUDA, fp16 on CPU. `local_rank` picks cuda:LOCAL_RANK.
core::Runtime read_runtime(const core::Config& cfg, int local_rank);

// `environment`: where rank variables are read (default: the process environment; `train`
// passes one with its --local_rank / --world_size flags filled in, cli/launcher_flags.h).
DistSetup setup_distributed(const core::Config& cfg, const dist::EnvLookup& environment = {});

}  // namespace lmtrain::cli
