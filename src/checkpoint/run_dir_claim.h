// Claiming a run dir for one training job, so that a run is never lost to another:
//  - a lock: RUN_DIR/.lock is flock'ed by rank 0 for the whole run (the other ranks of the job
//    share it through rank 0), so a second job on the same run dir is refused at start with
//    "run dir R is in use by pid N on host H"; the kernel drops the lock when rank 0 dies, so a
//    killed run never leaves the directory locked;
//  - no silent overwrite: a fresh run (no checkpoint.resume) into a run dir that already holds
//    checkpoints is refused, naming them and the choices (--resume=auto, another run.dir,
//    --overwrite). With --overwrite the earlier run is moved into RUN_DIR/previous-<n>/, never
//    deleted;
//  - a fresh timeline starts fresh files: a fresh run (or --resume=auto that finds no
//    checkpoint) into a run dir without checkpoints moves an abandoned run's files
//    (metrics.jsonl, train.log, config.yaml, ...) aside into RUN_DIR/previous-<n>/ with a
//    warning, so its metrics are never merged with the new ones, and refuses a run dir holding
//    anything lmtrain does not write there, naming it (a user's data is not ours to move);
//  - no rewind over history: a resume from an earlier checkpoint (a path, an epoch link, best)
//    is refused while later checkpoints of the run dir would be overwritten by the new
//    timeline, naming them; --overwrite moves them aside into RUN_DIR/previous-<n>/checkpoints/.
#pragma once
#include <string>

#include "checkpoint/checkpoint_store.h"
#include "core/file_lock.h"  // IWYU pragma: keep (the returned lock)
#include "distributed/group.h"

namespace lmtrain::train {

// Collective: every rank of `group` calls it with the same arguments before writing anything
// into `run_dir` (which must exist). Rank 0 decides and every rank gets the verdict, so a
// refusal is the same UsageError (exit code 2) on all of them. Rank 0's result holds the lock
// (keep it alive for the run); the other ranks' results hold nothing.
// `resume` is the run's checkpoint.resume.
core::FileLock claim_run_dir(const std::string& run_dir, const CheckpointRequest& resume,
                             bool overwrite, dist::Group& group);

}  // namespace lmtrain::train
