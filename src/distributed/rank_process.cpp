#include "distributed/rank_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <thread>
#include <vector>

#include "core/error.h"

extern char** environ;

namespace lmtrain::dist {

void Stream::emit(const char* data, size_t n) {
  pending.append(data, n);
  size_t start = 0;
  static const std::string kErrorTag = "error: ";
  for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
    *out << prefix;
    out->write(pending.data() + start, static_cast<std::streamsize>(nl + 1 - start));
    if (pending.compare(start, kErrorTag.size(), kErrorTag) == 0) {
      last_error = pending.substr(start + kErrorTag.size(), nl - start - kErrorTag.size());
    }
  }
  pending.erase(0, start);
  out->flush();
}

void Stream::drain() {
  char buf[65536];
  while (fd >= 0) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0 || !(p.revents & (POLLIN | POLLHUP | POLLERR))) return;
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n > 0) {
      emit(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      close_stream();
    }
  }
}

void Stream::close_stream() {
  if (!pending.empty()) {
    if (pending.rfind("error: ", 0) == 0) last_error = pending.substr(7);
    *out << prefix << pending << '\n';
    out->flush();
    pending.clear();
  }
  if (fd >= 0) ::close(fd);
  fd = -1;
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "killed by signal " + std::to_string(sig) + " (" + ::strsignal(sig) + ")";
  }
  return "status " + std::to_string(status);
}

bool failed(int status) { return !WIFEXITED(status) || WEXITSTATUS(status) != 0; }

std::string self_exe() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) throw Error("launch: cannot find this executable (/proc/self/exe)");
  return std::string(buf, static_cast<size_t>(n));
}

std::map<std::string, std::string> rank_env(const LaunchOptions& o, int local_rank, int attempt) {
  const int world = o.nnodes * o.nproc_per_node;
  std::map<std::string, std::string> env = {
      {"RANK", std::to_string(o.node_rank * o.nproc_per_node + local_rank)},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"WORLD_SIZE", std::to_string(world)},
      {"LOCAL_WORLD_SIZE", std::to_string(o.nproc_per_node)},
      {"GROUP_RANK", std::to_string(o.node_rank)},
      {"GROUP_WORLD_SIZE", std::to_string(o.nnodes)},
      {"ROLE_RANK", std::to_string(o.node_rank * o.nproc_per_node + local_rank)},
      {"ROLE_WORLD_SIZE", std::to_string(world)},
      {"ROLE_NAME", "default"},
      {"MASTER_ADDR", o.master_addr},
      {"MASTER_PORT", std::to_string(o.master_port)},
      {"TORCHELASTIC_RESTART_COUNT", std::to_string(attempt)},
      {"TORCHELASTIC_MAX_RESTARTS", std::to_string(o.max_restarts)},
      {"TORCHELASTIC_RUN_ID", "none"},
      {"TORCHELASTIC_USE_AGENT_STORE", "False"},
      {"LMTRAIN_LAUNCHER", "1"},
  };
  if (!std::getenv("OMP_NUM_THREADS")) {
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    env["OMP_NUM_THREADS"] = std::to_string(std::max(1u, cores / o.nproc_per_node));
  }
  return env;
}

// fork + exec one rank with its stdout/stderr on pipes.
Rank spawn_rank(const LaunchOptions& o, int local_rank, int attempt, const std::string& exe) {
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    throw Error(std::string("launch: pipe failed: ") + std::strerror(errno));
  }
  std::vector<std::string> env_strings;
  auto overrides = rank_env(o, local_rank, attempt);
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    if (!overrides.count(kv.substr(0, kv.find('=')))) env_strings.push_back(kv);
  }
  for (const auto& [k, v] : overrides) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);

  std::vector<std::string> argv_strings = o.command;
  const bool ours = is_lmtrain_command(o.command[0]);
  if (ours) argv_strings.insert(argv_strings.begin(), exe);
  std::vector<char*> argv;
  for (auto& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);

  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw Error(std::string("launch: fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    // Own process group: a terminal's Ctrl-C reaches only the launcher, which forwards it
    // once. Die with the launcher, whatever kills it.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    environ = envp.data();
    if (ours) {
      ::execv(argv[0], argv.data());
    } else {
      ::execvp(argv[0], argv.data());
    }
    const std::string msg =
        std::string("cannot execute '") + argv[0] + "': " + std::strerror(errno) + "\n";
    [[maybe_unused]] auto n = ::write(2, msg.data(), msg.size());
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  Rank r;
  r.rank = o.node_rank * o.nproc_per_node + local_rank;
  r.pid = pid;
  r.running = true;
  const std::string prefix = "[rank " + std::to_string(r.rank) + "] ";
  r.out = Stream{out_pipe[0], &std::cout, prefix, {}, {}};
  r.err = Stream{err_pipe[0], &std::cerr, prefix, {}, {}};
  return r;
}

}  // namespace lmtrain::dist
