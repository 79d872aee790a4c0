// Graceful stop on SIGINT/SIGTERM: the first signal asks the training loop to finish its step,
// save a checkpoint and exit; a second one exits immediately.
#pragma once

namespace lmtrain::core {

void install_stop_handlers();
bool stop_requested();
int stop_signal();  // the signal that asked to stop, or 0

}  // namespace lmtrain::core
