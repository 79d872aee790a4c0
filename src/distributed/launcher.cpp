#include "distributed/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <iostream>
#include <map>
#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "distributed/rank_process.h"

namespace lmtrain::dist {
namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point after_seconds(double s) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// Signal handling: the handler only records the signal and wakes the poll loop.
volatile sig_atomic_t g_signal = 0;
volatile sig_atomic_t g_signal_count = 0;
int g_wake_pipe[2] = {-1, -1};

void on_signal(int sig) {
  g_signal = sig;
  g_signal_count = g_signal_count + 1;
  if (g_wake_pipe[1] >= 0) {
    const char c = 1;
    [[maybe_unused]] auto n = ::write(g_wake_pipe[1], &c, 1);
  }
}

void say(const std::string& line) { std::cerr << "[launch] " << line << std::endl; }

struct AttemptResult {
  bool ok = true;
  int interrupted_by = 0;  // signal number, when the user stopped the job
  int failed_rank = -1;
  std::string failure;
  int exit_code = -1;  // the failed rank's exit code (-1: killed by a signal)
  std::string error;   // its last "error: ..." line, once all output is read
};

// An error that reports another rank's failure rather than its own cause (a peer that
// vanished mid-collective, a rendezvous verdict that never came).
bool is_consequence(const std::string& error) {
  for (const char* marker : {"see rank 0's error", "lost rank 0", "no answer from rank 0",
                             "closed by peer", "reset by peer", "Broken pipe"}) {
    if (error.find(marker) != std::string::npos) return true;
  }
  return false;
}

// Of the ranks found dead in one pass, the one to blame: a rank killed by a signal (a crash or a
// kill) before one that exited with an error, and an error of its own before one that reports a
// peer's failure; the lowest rank otherwise.
Rank* pick_culprit(const std::vector<Rank*>& dead) {
  auto score = [](const Rank* r) {
    return (WIFSIGNALED(r->status) ? 2 : 0) + (is_consequence(r->err.last_error) ? 0 : 1);
  };
  Rank* best = nullptr;
  for (Rank* r : dead) {
    if (!best || score(r) > score(best)) best = r;
  }
  return best;
}

AttemptResult supervise(std::vector<Rank>& ranks, double grace_s) {
  AttemptResult res;
  // When set, ranks still running at `kill_at` get SIGKILL.
  bool kill_pending = false;
  Clock::time_point kill_at;
  int forwarded_count = 0;
  auto signal_all = [&](int sig) {
    for (auto& r : ranks) {
      if (r.running) ::kill(r.pid, sig);
    }
  };
  for (;;) {
    // Forward new user signals; a second one is impatience: kill.
    if (g_signal_count > forwarded_count) {
      forwarded_count = g_signal_count;
      res.interrupted_by = g_signal;
      if (forwarded_count == 1) {
        say(log::format("got %s: forwarding it to the ranks (again to kill them)",
                        ::strsignal(g_signal)));
        signal_all(g_signal);
        if (!kill_pending) {
          kill_pending = true;
          kill_at = after_seconds(10 * grace_s);
        }
      } else {
        signal_all(SIGKILL);
      }
    }
    // Reap exited ranks. When several are found dead in one pass, blame the root cause
    // (pick_culprit): the others are usually peers whose collectives failed because of it.
    std::vector<Rank*> dead;
    for (auto& r : ranks) {
      if (!r.running) continue;
      int status = 0;
      const pid_t p = ::waitpid(r.pid, &status, WNOHANG);
      if (p != r.pid) continue;
      r.running = false;
      r.status = status;
      if (!failed(status) || res.failed_rank >= 0 || res.interrupted_by) continue;
      r.err.drain();  // its last error line decides whether it is a cause or a consequence
      dead.push_back(&r);
    }
    if (Rank* culprit = pick_culprit(dead)) {
      res.ok = false;
      res.failed_rank = culprit->rank;
      res.failure = describe_status(culprit->status);
      res.exit_code = WIFEXITED(culprit->status) ? WEXITSTATUS(culprit->status) : -1;
      say(log::format("rank %d (pid %d) failed: %s; stopping the other ranks", culprit->rank,
                      (int)culprit->pid, res.failure.c_str()));
      signal_all(SIGTERM);
      kill_pending = true;
      kill_at = after_seconds(grace_s);
    }
    if (kill_pending && Clock::now() >= kill_at) {
      for (auto& r : ranks) {
        if (r.running) say(log::format("rank %d did not stop in time: SIGKILL", r.rank));
      }
      signal_all(SIGKILL);
      kill_pending = false;
    }
    // Forward output.
    std::vector<pollfd> fds;
    std::vector<Stream*> streams;
    for (auto& r : ranks) {
      for (Stream* s : {&r.out, &r.err}) {
        if (s->fd >= 0) {
          fds.push_back({s->fd, POLLIN, 0});
          streams.push_back(s);
        }
      }
    }
    const bool any_running =
        std::any_of(ranks.begin(), ranks.end(), [](const Rank& r) { return r.running; });
    if (!any_running && fds.empty()) {
      // Every stream is read to its end now: the failed rank's last error line is complete.
      for (const auto& r : ranks) {
        if (r.rank == res.failed_rank) res.error = r.err.last_error;
      }
      break;
    }
    fds.push_back({g_wake_pipe[0], POLLIN, 0});
    ::poll(fds.data(), fds.size(), 100);
    char buf[65536];
    for (size_t i = 0; i + 1 < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = ::read(fds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        streams[i]->emit(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        streams[i]->close_stream();
      }
    }
    if (fds.back().revents & POLLIN) {
      [[maybe_unused]] auto n = ::read(g_wake_pipe[0], buf, sizeof(buf));
    }
  }
  return res;
}

}  // namespace

bool is_lmtrain_command(const std::string& word) {
  return word == "train" || word == "bench" || word == "eval" || word == "generate" ||
         word == "prepare" || word == "version";
}

int run_launch(const LaunchOptions& o) {
  if (o.command.empty()) throw UsageError("launch: nothing to run (give `-- train ...`)");
  if (o.nproc_per_node < 1) throw UsageError("launch: --nproc_per_node must be >= 1");
  if (o.nnodes < 1) throw UsageError("launch: --nnodes must be >= 1");
  if (o.node_rank < 0 || o.node_rank >= o.nnodes) {
    throw UsageError(log::format("launch: --node_rank=%d is outside 0..%d (--nnodes=%d)",
                                 o.node_rank, o.nnodes - 1, o.nnodes));
  }
  if (o.master_port < 1 || o.master_port > 65535) {
    throw UsageError(log::format("launch: --master_port=%d is not a TCP port", o.master_port));
  }
  const std::string exe = self_exe();
  if (::pipe2(g_wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw Error(std::string("launch: pipe failed: ") + std::strerror(errno));
  }
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);

  std::string cmd;
  for (const auto& a : o.command) cmd += (cmd.empty() ? "" : " ") + a;
  const int world = o.nnodes * o.nproc_per_node;
  for (int attempt = 0;; ++attempt) {
    say(log::format(
        "node %d of %d: starting ranks %d..%d of %d (master %s:%d%s): %s", o.node_rank, o.nnodes,
        o.node_rank * o.nproc_per_node, (o.node_rank + 1) * o.nproc_per_node - 1, world,
        o.master_addr.c_str(), o.master_port,
        attempt ? log::format(", restart %d of %d", attempt, o.max_restarts).c_str() : "",
        cmd.c_str()));
    std::vector<Rank> ranks;
    try {
      for (int l = 0; l < o.nproc_per_node; ++l) {
        ranks.push_back(spawn_rank(o, l, attempt, exe));
        say(log::format("rank %d: pid %d", ranks.back().rank, (int)ranks.back().pid));
      }
    } catch (...) {
      for (auto& r : ranks) ::kill(r.pid, SIGKILL);
      throw;
    }
    const auto res = supervise(ranks, o.grace_s);
    if (res.interrupted_by) {
      say(log::format("stopped by %s", ::strsignal(res.interrupted_by)));
      return 128 + res.interrupted_by;
    }
    if (res.ok) {
      say(log::format("all %d rank(s) of node %d finished", o.nproc_per_node, o.node_rank));
      return 0;
    }
    // The last line names the rank and what it said: the root cause, not the echo of a peer.
    const std::string cause = res.error.empty() ? "" : ": " + res.error;
    if (res.exit_code == 2) {
      // A usage or config error: restarting cannot fix it, and 2 is passed through so that a
      // scheduler sees the same code as from a single process.
      log::error(log::format("launch: rank %d failed with a usage or config error (exit code 2)%s",
                             res.failed_rank, cause.c_str()));
      return 2;
    }
    if (attempt < o.max_restarts) {
      say(log::format("restarting the node's %d rank(s) (restart %d of %d) after rank %d failed",
                      o.nproc_per_node, attempt + 1, o.max_restarts, res.failed_rank));
      continue;
    }
    log::error(log::format(
        "launch: rank %d failed (%s%s)%s", res.failed_rank, res.failure.c_str(),
        o.max_restarts ? log::format("; no restarts left of %d", o.max_restarts).c_str() : "",
        cause.c_str()));
    return 1;
  }
}

}  // namespace lmtrain::dist
