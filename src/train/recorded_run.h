// run_training with its record: RUN_DIR/run_state.json (checkpoint/run_state.h) says "running"
// while it trains and how it ended (finished, stopped, failed with the error), and the run's
// report page (report/run_report.h, log.report) is rewritten once the end is recorded, so the
// page a user left open shows the final state and checkpoints. Rank 0 writes; `lmtrain train`
// calls this for the run and for a teacher trained first.
#pragma once
#include "train/trainer.h"

namespace lmtrain::train {

// Rethrows whatever run_training throws, after recording it.
TrainResult run_training_recorded(const RunOptions& options, const SetupOptions& setup,
                                  ConfigSnapshot& snapshot, dist::Group& group,
                                  const core::Runtime& rt, const StartedRun& run);

}  // namespace lmtrain::train
