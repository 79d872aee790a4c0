// Where this process sits in a distributed job, read from the environment of whatever started
// it. Order: torchrun / `lmtrain launch` (RANK, WORLD_SIZE, ...), Open MPI
// (OMPI_COMM_WORLD_*), Slurm (SLURM_PROCID, SLURM_NTASKS, ...), else a single process.
#pragma once
#include <functional>
#include <optional>
#include <string>

namespace lmtrain::dist {

struct DistEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string source = "none";  // torchrun | mpi | slurm | none
  // torchrun's static rendezvous: its agent already hosts the TCPStore on MASTER_PORT, so
  // every rank (rank 0 included) connects as a client, under the key prefix
  // "/worker/attempt_<restart_count>" (what torch.distributed does).
  bool use_agent_store = false;
  int restart_count = 0;             // TORCHELASTIC_RESTART_COUNT: >0 after a launcher restart
  bool launched_by_lmtrain = false;  // `lmtrain launch` prefixes the output lines itself

  bool distributed() const { return world_size > 1; }
  std::string describe() const;
};

// Reads variables through `getenv` (injectable for tests). Inconsistent values (rank outside the
// world, a non-number, a missing partner variable) are UsageErrors naming the variable.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
DistEnv discover_env(const EnvLookup& getenv);
DistEnv discover_env();  // from the process environment

// First host of a Slurm node list: "node[01-04,07],gpu2" -> "node01".
std::string first_slurm_host(const std::string& nodelist);

}  // namespace lmtrain::dist
