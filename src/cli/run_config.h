// Builds the run config of `train` / `bench`: schema defaults < --config FILE < overrides.
#pragma once
#include "cli/args.h"
#include "core/config.h"

namespace lmtrain::cli {

// Flags every config-driven command accepts.
std::vector<FlagSpec> config_flags();
core::Config load_run_config(const ParsedArgs& args);

}  // namespace lmtrain::cli
