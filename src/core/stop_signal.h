// Graceful stop on SIGINT/SIGTERM: the first signal asks the training loop to finish its step,
// save a checkpoint and exit; a second one exits immediately.
#pragma once

namespace lmtrain::core {

void install_stop_handlers();
bool stop_requested();
int stop_signal();  // the signal that asked to stop, or 0

// A closed stdout or stderr (`lmtrain train ... | head -3`, a terminal that went away) must not
// kill a run with SIGPIPE: the signal is ignored, a write to the console then fails instead, and
// the logger takes that as a lost terminal (its log file keeps every line). Inherited by the
// ranks a launcher starts.
void ignore_broken_pipes();

}  // namespace lmtrain::core
