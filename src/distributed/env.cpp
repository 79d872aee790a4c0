#include "distributed/env.h"

#include <cstdlib>

#include "core/error.h"
#include "core/parse_int.h"

namespace lmtrain::dist {
namespace {

int parse_int(const std::string& var, const std::string& value) {
  const auto v = core::parse_nonnegative_int(value, int64_t{1} << 30);
  if (!v) {
    throw UsageError("environment variable " + var + "='" + value +
                     "' is not a non-negative integer");
  }
  return static_cast<int>(*v);
}

struct Reader {
  const EnvLookup& getenv;
  std::optional<std::string> get(const std::string& var) const {
    auto v = getenv(var);
    if (v && v->empty()) return std::nullopt;
    return v;
  }
  int require_int(const std::string& var, const std::string& because) const {
    auto v = get(var);
    if (!v) throw UsageError("environment variable " + var + " is not set (" + because + ")");
    return parse_int(var, *v);
  }
  int int_or(const std::string& var, int def) const {
    auto v = get(var);
    return v ? parse_int(var, *v) : def;
  }
  std::string str_or(const std::string& var, const std::string& def) const {
    return get(var).value_or(def);
  }
};

// "2(x3),1" -> 2: tasks on the first node of SLURM_TASKS_PER_NODE.
int first_tasks_per_node(const std::string& spec) {
  size_t i = 0;
  while (i < spec.size() && std::isdigit(static_cast<unsigned char>(spec[i]))) ++i;
  return i == 0 ? 1 : std::stoi(spec.substr(0, i));
}

void check_consistent(const DistEnv& e, const std::string& rank_var, const std::string& world_var) {
  if (e.world_size < 1) throw UsageError("environment variable " + world_var + " must be >= 1");
  if (e.rank >= e.world_size) {
    throw UsageError("environment variable " + rank_var + "=" + std::to_string(e.rank) +
                     " is outside the world of " + world_var + "=" + std::to_string(e.world_size));
  }
  if (e.local_world_size < 1 || e.local_rank >= e.local_world_size) {
    throw UsageError("local rank " + std::to_string(e.local_rank) + " is outside the " +
                     std::to_string(e.local_world_size) + " local ranks (from " + e.source +
                     " environment)");
  }
  if (e.master_port < 1 || e.master_port > 65535) {
    throw UsageError("MASTER_PORT=" + std::to_string(e.master_port) +
                     " is not a TCP port (1..65535)");
  }
}

}  // namespace

std::string first_slurm_host(const std::string& nodelist) {
  // The first entry ends at a top-level comma; brackets hold a range list.
  std::string first;
  int depth = 0;
  for (char c : nodelist) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) break;
    first += c;
  }
  const auto open = first.find('[');
  if (open == std::string::npos) return first;
  std::string inner = first.substr(open + 1, first.find(']') - open - 1);
  inner = inner.substr(0, inner.find(','));  // first range or number
  inner = inner.substr(0, inner.find('-'));  // first number of the range, zero padding kept
  return first.substr(0, open) + inner + first.substr(first.find(']') + 1);
}

std::string DistEnv::describe() const {
  if (!distributed()) return "single process";
  return "rank " + std::to_string(rank) + " of " + std::to_string(world_size) + " (local " +
         std::to_string(local_rank) + " of " + std::to_string(local_world_size) + "), master " +
         master_addr + ":" + std::to_string(master_port) + ", from " + source + " environment";
}

DistEnv discover_env(const EnvLookup& getenv) {
  const Reader r{getenv};
  DistEnv e;
  e.master_addr = r.str_or("MASTER_ADDR", "127.0.0.1");
  e.master_port = r.int_or("MASTER_PORT", 29500);
  e.launched_by_lmtrain = r.get("LMTRAIN_LAUNCHER").has_value();
  e.restart_count = r.int_or("TORCHELASTIC_RESTART_COUNT", 0);
  if (r.get("RANK") || r.get("WORLD_SIZE")) {
    e.source = "torchrun";
    e.rank = r.require_int("RANK", "WORLD_SIZE is set");
    e.world_size = r.require_int("WORLD_SIZE", "RANK is set");
    e.local_rank = r.int_or("LOCAL_RANK", e.rank);
    e.local_world_size = r.int_or("LOCAL_WORLD_SIZE", e.world_size);
    e.use_agent_store = r.str_or("TORCHELASTIC_USE_AGENT_STORE", "") == "True";
    check_consistent(e, "RANK", "WORLD_SIZE");
    return e;
  }
  if (r.get("OMPI_COMM_WORLD_RANK")) {
    e.source = "mpi";
    e.rank = r.require_int("OMPI_COMM_WORLD_RANK", "Open MPI job");
    e.world_size = r.require_int("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK is set");
    e.local_rank = r.int_or("OMPI_COMM_WORLD_LOCAL_RANK", e.rank);
    e.local_world_size = r.int_or("OMPI_COMM_WORLD_LOCAL_SIZE", e.world_size);
    check_consistent(e, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE");
    return e;
  }
  if (r.get("SLURM_PROCID") && r.get("SLURM_NTASKS")) {
    e.source = "slurm";
    e.rank = r.require_int("SLURM_PROCID", "Slurm job");
    e.world_size = r.require_int("SLURM_NTASKS", "SLURM_PROCID is set");
    e.local_rank = r.int_or("SLURM_LOCALID", 0);
    e.local_world_size = first_tasks_per_node(r.str_or("SLURM_TASKS_PER_NODE", "1"));
    if (auto n = r.get("SLURM_NTASKS_PER_NODE"))
      e.local_world_size = parse_int("SLURM_NTASKS_PER_NODE", *n);
    if (!r.get("MASTER_ADDR")) {
      // Rank 0 runs on the first node of the allocation.
      if (auto nodes = r.get("SLURM_JOB_NODELIST")) e.master_addr = first_slurm_host(*nodes);
    }
    if (!r.get("MASTER_PORT")) {
      // A per-job port, so that two jobs sharing a node don't collide.
      e.master_port = 20000 + r.int_or("SLURM_JOB_ID", 0) % 10000;
    }
    check_consistent(e, "SLURM_PROCID", "SLURM_NTASKS");
    return e;
  }
  return e;
}

DistEnv discover_env() {
  return discover_env([](const std::string& var) -> std::optional<std::string> {
    const char* v = std::getenv(var.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  });
}

}  // namespace lmtrain::dist
