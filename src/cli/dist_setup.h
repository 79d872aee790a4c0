// Shared by `train` and `bench`: find this process's place in the job (dist/env.h), set up
// the console for it, and build its dist::Group.
#pragma once
#include <memory>

#include "core/config.h"
#include "dist/env.h"
#include "dist/group.h"

namespace lmtrain::cli {

struct DistSetup {
  dist::DistEnv env;
  std::unique_ptr<dist::Group> group;
};

DistSetup setup_distributed(const core::Config& cfg);

}  // namespace lmtrain::cli
