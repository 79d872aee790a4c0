// The processes of one node's ranks for `lmtrain launch`: spawning a rank with torchrun's
// environment and its output on pipes, and cutting that output into "[rank R] "-prefixed lines.
#pragma once
#include <sys/types.h>

#include <iosfwd>
#include <map>
#include <string>

#include "distributed/launcher.h"

namespace lmtrain::dist {

// One output stream of one rank: bytes are cut into lines and each line is prefixed.
struct Stream {
  int fd = -1;
  std::ostream* out = nullptr;
  std::string prefix;
  std::string pending;
  std::string last_error;  // the text of the last "error: ..." line, without that tag

  void emit(const char* data, size_t n);
  void close_stream();  // flushes a last unterminated line
  // Reads what the pipe holds without blocking (the rank has exited), up to end of file.
  void drain();
};

struct Rank {
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  int status = 0;  // waitpid status once it has exited
  Stream out, err;
};

// torchrun's variables for local rank `local_rank` of this node, attempt `attempt`.
std::map<std::string, std::string> rank_env(const LaunchOptions& o, int local_rank, int attempt);

// fork + exec one rank (in its own process group, killed if the launcher dies) with stdout and
// stderr on pipes. lmtrain commands re-execute `exe`; anything else is looked up in PATH.
Rank spawn_rank(const LaunchOptions& o, int local_rank, int attempt, const std::string& exe);

std::string self_exe();
// "exit code 3" or "killed by signal 9 (Killed)".
std::string describe_status(int status);
bool failed(int status);

}  // namespace lmtrain::dist
