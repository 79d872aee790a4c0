// Builds the run config of `train` / `bench`: schema defaults < preset < --config FILE <
// overrides.
#pragma once
#include "cli/args.h"
#include "core/config.h"

namespace lmtrain::cli {

// Flags every config-driven command accepts.
std::vector<FlagSpec> config_flags();
// `preset`: a YAML file merged before --config ("" = none), e.g. the one --model_type picks.
core::Config load_run_config(const ParsedArgs& args, const std::string& preset = "");

}  // namespace lmtrain::cli
