// `lmtrain launch [flags] -- COMMAND ...`: torchrun's flag names (underscores or dashes).
#include <iostream>
#include <thread>

#include "cli/commands.h"
#include "core/error.h"
#include "core/parse_int.h"
#include "core/stop_signal.h"
#include "distributed/launcher.h"
#include "distributed/rendezvous.h"

namespace lmtrain::cli {
namespace {

const char* kHelp = R"(Usage: lmtrain launch [flags] [--] COMMAND [ARGS...]

Starts and supervises the ranks of a distributed job on this node, like torchrun:
  lmtrain launch --nproc_per_node=2 -- train --config configs/gpt2-tiny.yaml ...
COMMAND is an lmtrain command (train, bench, eval, ...) run with this binary, or any other
program (as with torchrun --no_python). Each rank gets torchrun's environment (RANK, LOCAL_RANK,
WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RESTART_COUNT, ...), its
output lines are prefixed with "[rank R]", SIGINT/SIGTERM are forwarded to every rank, and when
a rank fails the others are stopped and the launcher exits 1, its last line naming the rank and
its error. Exit codes: 0 all ranks succeeded; 2 a rank stopped on a usage or config error (passed
through, not restarted); 1 any other failure; 128+signal when stopped by SIGINT/SIGTERM.

Flags (dashes or underscores):
  --nproc_per_node=N|auto   ranks on this node (auto: one per CPU core) [1]
  --nnodes=N                nodes in the job [1]
  --node_rank=R             this node's index, 0..nnodes-1 [0]
  --master_addr=HOST        address of the node running rank 0 [127.0.0.1]
  --master_port=PORT        TCP port of the rendezvous store on rank 0 [29500]
  --standalone              single node on a free port (ignores --master_addr/--master_port)
  --max_restarts=K          restart the node's ranks up to K times after a failure; `train`
                            then resumes from the latest checkpoint [0]
  --grace_s=S               seconds between SIGTERM and SIGKILL when stopping ranks [10]
  --no_python               accepted for torchrun compatibility (no effect)
)";

int parse_nonneg(const std::string& flag, const std::string& v) {
  const auto n = core::parse_nonnegative_int(v, 1'000'000);
  if (!n) throw UsageError("launch: --" + flag + "='" + v + "' is not a non-negative integer");
  return static_cast<int>(*n);
}

}  // namespace

int cmd_launch(const Args& args) {
  core::ignore_broken_pipes();  // a closed stdout must not kill the job (nor, inherited, a rank)
  dist::LaunchOptions o;
  bool standalone = false;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a == "-h" || a == "--help") {
      std::cout << kHelp;
      return 0;
    }
    if (a.rfind("--", 0) != 0) break;  // the command starts here
    std::string name = a.substr(2), value;
    const auto eq = name.find('=');
    const bool has_value = eq != std::string::npos;
    if (has_value) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    for (auto& c : name) c = c == '-' ? '_' : c;
    if (name == "standalone" || name == "no_python") {
      if (has_value) throw UsageError("launch: --" + name + " takes no value");
      standalone = standalone || name == "standalone";
      continue;
    }
    if (!has_value) {
      if (i + 1 >= args.size()) throw UsageError("launch: --" + name + " needs a value");
      value = args[++i];
    }
    if (name == "nproc_per_node") {
      o.nproc_per_node = value == "auto"
                             ? static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))
                             : parse_nonneg(name, value);
    } else if (name == "nnodes") {
      if (value.find(':') != std::string::npos) {
        throw UsageError("launch: --nnodes=" + value +
                         ": elastic node ranges are not supported; give a fixed count");
      }
      o.nnodes = parse_nonneg(name, value);
    } else if (name == "node_rank") {
      o.node_rank = parse_nonneg(name, value);
    } else if (name == "master_addr") {
      o.master_addr = value;
    } else if (name == "master_port") {
      o.master_port = parse_nonneg(name, value);
    } else if (name == "max_restarts") {
      o.max_restarts = parse_nonneg(name, value);
    } else if (name == "grace_s") {
      o.grace_s = parse_nonneg(name, value);
    } else {
      throw UsageError("launch: unknown flag --" + name + " (see `lmtrain launch --help`)");
    }
  }
  o.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  if (o.command.empty()) {
    throw UsageError(
        "launch: no command given; e.g. `lmtrain launch --nproc_per_node=2 -- train "
        "--config configs/gpt2-tiny.yaml`");
  }
  if (standalone) {
    if (o.nnodes != 1) throw UsageError("launch: --standalone runs a single node (--nnodes=1)");
    o.master_addr = "127.0.0.1";
    o.master_port = dist::pick_free_port();
  }
  return dist::run_launch(o);
}

}  // namespace lmtrain::cli
