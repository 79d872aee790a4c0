#include "cli/launcher_flags.h"

#include <cstdlib>
#include <map>
#include <optional>

#include "core/error.h"
#include "core/parse_int.h"

namespace lmtrain::cli {
namespace {

std::optional<std::string> process_env(const std::string& var) {
  const char* v = std::getenv(var.c_str());
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

int64_t flag_int(const ParsedArgs& args, const std::string& name) {
  return args.get_int(name, -1, -1, int64_t{1} << 30);
}

// The flag's value, checked against the environment variable when that is set.
std::optional<int64_t> checked_flag(const ParsedArgs& args, const std::string& flag,
                                    const std::string& var) {
  // -1: what scripts written for the launcher default to when started without it.
  if (!args.has(flag) || flag_int(args, flag) == -1) return std::nullopt;
  const int64_t v = flag_int(args, flag);
  if (auto env = process_env(var)) {
    const auto e = core::parse_nonnegative_int(*env, int64_t{1} << 30);
    if (!e || *e != v) {
      throw UsageError("--" + flag + "=" + std::to_string(v) + " contradicts " + var + "=" + *env +
                       " in the environment (set by the launcher): drop --" + flag +
                       " or run without the launcher");
    }
  }
  return v;
}

}  // namespace

std::vector<FlagSpec> launcher_flags() {
  return {
      {"local_rank", FlagKind::kValue,
       "this process's rank on the node, as torch.distributed.launch passes it: used when "
       "LOCAL_RANK is not set, else must equal it (-1: not launched)",
       "N"},
      {"local-rank", FlagKind::kValue, "the same as --local_rank (torch >= 2.0 spelling)", "N"},
      {"world_size", FlagKind::kValue,
       "ranks in the job: used when WORLD_SIZE is not set, else must equal it (without either, "
       "one process)",
       "N"},
  };
}

dist::EnvLookup environment_with_launcher_flags(const ParsedArgs& args) {
  if (args.has("local_rank") && args.has("local-rank") &&
      flag_int(args, "local_rank") != flag_int(args, "local-rank")) {
    throw UsageError("--local_rank=" + args.get("local_rank") +
                     " contradicts --local-rank=" + args.get("local-rank"));
  }
  const std::string rank_flag = args.has("local-rank") ? "local-rank" : "local_rank";
  const auto local_rank = checked_flag(args, rank_flag, "LOCAL_RANK");
  const auto world = checked_flag(args, "world_size", "WORLD_SIZE");
  std::map<std::string, std::string> fill;  // variables the environment lacks
  if (local_rank && !process_env("LOCAL_RANK")) fill["LOCAL_RANK"] = std::to_string(*local_rank);
  if (world && !process_env("WORLD_SIZE")) {
    fill["WORLD_SIZE"] = std::to_string(*world);
    // One node: the deprecated launcher's single-node jobs, rank = local rank.
    if (!process_env("LOCAL_WORLD_SIZE")) fill["LOCAL_WORLD_SIZE"] = std::to_string(*world);
    if (!process_env("RANK")) {
      const auto r = local_rank ? std::optional<std::string>(std::to_string(*local_rank))
                                : process_env("LOCAL_RANK");
      if (!r && *world > 1) {
        throw UsageError("--world_size=" + std::to_string(*world) +
                         " needs --local_rank (or RANK / LOCAL_RANK) to say which rank this "
                         "process is");
      }
      fill["RANK"] = r.value_or("0");
    }
  }
  if (local_rank && *local_rank > 0 && !world && !process_env("WORLD_SIZE")) {
    throw UsageError("--" + rank_flag + "=" + std::to_string(*local_rank) +
                     " without --world_size or WORLD_SIZE: a job of how many ranks? (no launcher "
                     "and neither flag = one process)");
  }
  return [fill](const std::string& var) -> std::optional<std::string> {
    if (auto it = fill.find(var); it != fill.end()) return it->second;
    return process_env(var);
  };
}

}  // namespace lmtrain::cli
