// The training run: data, model, optimizer, resume, the step loop, evaluation, checkpoints.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "core/file_lock.h"
#include "core/runtime.h"
#include "distributed/group.h"
#include "train/config_snapshot.h"
#include "train/run_options.h"

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

// A run dir claimed for one job, with this rank's log open in it.
struct StartedRun {
  core::FileLock lock;   // rank 0's lock on RUN_DIR/.lock, held until the run ends
  std::string log_path;  // RUN_DIR/train.log (rank 0) or RUN_DIR/train.rankN.log
  int threads = 1;       // intra-op threads of this rank (train.threads resolved)
};

// Collective, before anything else of a run (whose `options` the command read, refusing there
// what must be refused before a file is written, e.g. train.cuda_graphs): claims options.run_dir
// for this job (checkpoint/run_dir_claim.h; `overwrite` = --overwrite moves an earlier run's
// checkpoints aside, otherwise a fresh run into them is refused), sends the log to this rank's
// file there and sets the intra-op threads. `rt`: this rank's device and precision
// (cli::read_runtime).
StartedRun start_run(const RunOptions& options, dist::Group& group, const core::Runtime& rt,
                     int local_world_size, bool overwrite = false);

// `options` and `setup` are what the command read from the resolved config (defaults < file <
// overrides; cli/read_options.h), `snapshot` that config as it is recorded (config_snapshot.h),
// `run` its started run dir. A distillation run with an online teacher needs distill.teacher
// set: a teacher to train first is trained by the caller, as a run of its own
// (cli/teacher_run.h).
TrainResult run_training(const RunOptions& options, const SetupOptions& setup,
                         ConfigSnapshot& snapshot, dist::Group& group, const core::Runtime& rt,
                         const StartedRun& run);

}  // namespace lmtrain::train
