#include "core/stop_signal.h"

#include <unistd.h>

#include <csignal>
#include <cstdlib>

namespace lmtrain::core {
namespace {
volatile std::sig_atomic_t g_stop_signal = 0;

void on_signal(int sig) {
  if (g_stop_signal != 0) _exit(128 + sig);
  g_stop_signal = sig;
}
}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

void ignore_broken_pipes() {
  struct sigaction sa {};
  sa.sa_handler = SIG_IGN;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGPIPE, &sa, nullptr);
}

bool stop_requested() { return g_stop_signal != 0; }
int stop_signal() { return g_stop_signal; }

}  // namespace lmtrain::core
