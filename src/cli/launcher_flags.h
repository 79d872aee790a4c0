// `--local_rank N` / `--local-rank=N` and `--world_size N`: what the deprecated
// `python -m torch.distributed.launch` passes to every rank (and what scripts written for it
// take). The environment stays the source of truth: a flag fills in a variable the environment
// lacks and must agree with one it has (a contradiction is a UsageError naming both).
#pragma once
#include <string>
#include <vector>

#include "cli/args.h"
#include "distributed/env.h"

namespace lmtrain::cli {

// The flag specs (--local_rank, --local-rank, --world_size) for a command's flag table.
std::vector<FlagSpec> launcher_flags();

// The process environment with the flags' values filled in where it has none. Without these
// flags it is the process environment itself; without a launcher and without the flags, one
// process.
dist::EnvLookup environment_with_launcher_flags(const ParsedArgs& args);

}  // namespace lmtrain::cli
