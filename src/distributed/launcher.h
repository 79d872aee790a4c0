// `lmtrain launch`: a torchrun-compatible launcher for the ranks of one node.
//
// Spawns nproc_per_node processes with torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE,
// LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, GROUP_RANK, TORCHELASTIC_RESTART_COUNT, ...),
// prefixes every line they print with "[rank R] ", forwards SIGINT/SIGTERM to them, and when one
// rank fails stops the others (SIGTERM, then SIGKILL after a grace period) and reports which
// rank failed and how. With max_restarts = K it restarts the whole node's group up to K times;
// the restarted ranks see TORCHELASTIC_RESTART_COUNT > 0 and `lmtrain train` then resumes from
// the latest checkpoint.
#pragma once
#include <string>
#include <vector>

namespace lmtrain::dist {

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  int max_restarts = 0;
  double grace_s = 10;  // after SIGTERM, before SIGKILL
  // What each rank runs: an lmtrain command ("train", "bench", ...) re-executes this binary;
  // anything else is a program looked up in PATH, as `torchrun --no_python` does.
  std::vector<std::string> command;
};

// Returns the launcher's exit code: 0 when every rank succeeded, 2 when the failed rank exited
// with 2 (a usage or config error; not restarted), 1 when a rank failed otherwise (after the
// restarts), 128+signal when interrupted. The last line names the failed rank and its error.
int run_launch(const LaunchOptions& options);

// True for the lmtrain subcommands `launch` re-executes with this binary.
bool is_lmtrain_command(const std::string& word);

}  // namespace lmtrain::dist
