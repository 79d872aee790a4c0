// The training run: data, model, optimizer, resume, the step loop, evaluation, checkpoints.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "core/config.h"
#include "core/runtime.h"
#include "distributed/group.h"

namespace lmtrain::train {

struct TrainResult {
  int64_t steps_done = 0;
  double last_loss = 0;
  std::optional<double> last_val_loss;
  std::string last_checkpoint;
  bool stopped_early = false;     // signal or train.stop_at_step
  int stop_signal = 0;            // SIGINT/SIGTERM (on any rank) that stopped the run, or 0
  bool already_complete = false;  // resumed at train.max_steps: nothing was trained
};

// `config` is the resolved config (defaults < file < overrides).
// `rt`: this rank's device and precision (core::Runtime::from_config).
// `overwrite` (--overwrite): a fresh run may take over a run dir holding an earlier run's
// checkpoints, which are moved aside first (train/run_dir_claim.h); otherwise that is refused.
TrainResult run_training(core::Config config, dist::Group& group, const core::Runtime& rt,
                         int local_world_size, bool overwrite = false);

}  // namespace lmtrain::train
