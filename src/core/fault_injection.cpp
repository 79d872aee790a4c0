#include "core/fault_injection.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/log.h"

namespace lmtrain::core {

namespace {

void fire_fault_if_asked(const char* variable, int signal, int rank, int64_t step,
                         const char* where) {
  static const char* restart = std::getenv("TORCHELASTIC_RESTART_COUNT");
  if (restart && std::string(restart) != "0") return;
  const char* spec = std::getenv(variable);
  int r = -1;
  long long s = -1;
  if (!spec || std::sscanf(spec, "%d:%lld", &r, &s) != 2 || r != rank || s != step) return;
  log::warn(log::format("%s=%s: rank %d sends itself signal %d %s step %lld", variable, spec, rank,
                        signal, where, s));
  ::kill(::getpid(), signal);
}

}  // namespace

void maybe_inject_fault(int rank, int64_t completed_step) {
  fire_fault_if_asked("LMTRAIN_FAULT_KILL", SIGKILL, rank, completed_step, "after");
  fire_fault_if_asked("LMTRAIN_FAULT_TERM", SIGTERM, rank, completed_step, "after");
}

void maybe_inject_save_fault(int rank, int64_t step) {
  fire_fault_if_asked("LMTRAIN_FAULT_KILL_SAVE", SIGKILL, rank, step,
                      "while saving the checkpoint of");
}

}  // namespace lmtrain::core
