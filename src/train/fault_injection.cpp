#include "train/fault_injection.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/log.h"

namespace lmtrain::train {

void maybe_inject_fault(int rank, int64_t completed_step) {
  static const char* spec = std::getenv("LMTRAIN_FAULT_KILL");
  if (!spec) return;
  const char* restart = std::getenv("TORCHELASTIC_RESTART_COUNT");
  if (restart && std::string(restart) != "0") return;
  int r = -1;
  long long s = -1;
  if (std::sscanf(spec, "%d:%lld", &r, &s) != 2 || r != rank || s != completed_step) return;
  log::warn(
      log::format("LMTRAIN_FAULT_KILL=%s: rank %d kills itself after step %lld", spec, rank, s));
  ::kill(::getpid(), SIGKILL);
}

}  // namespace lmtrain::train
