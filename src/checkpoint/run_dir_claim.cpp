#include "checkpoint/run_dir_claim.h"

#include "checkpoint/checkpoint_store.h"
#include "core/error.h"
#include "core/log.h"
#include "core/run_dir_lock.h"
#include "distributed/host_collectives.h"

namespace lmtrain::train {
namespace {

std::string describe_checkpoints(const std::vector<CheckpointEntry>& list) {
  std::string names;
  const size_t shown = 4;
  for (size_t i = 0; i < list.size(); ++i) {
    // The first few and the last: enough to recognise the run.
    if (i >= shown - 1 && i + 1 < list.size()) {
      if (i == shown - 1) names += ", ...";
      continue;
    }
    names += (names.empty() ? "" : ", ") + CheckpointStore::step_dir_name(list[i].step);
  }
  return std::to_string(list.size()) + " checkpoint" + (list.size() == 1 ? "" : "s") + " (" +
         names + ")";
}

// Rank 0's verdict: "" to go ahead, else the refusal. `lock` receives the lock.
std::string decide(const std::string& run_dir, bool resuming, bool overwrite,
                   core::FileLock& lock) {
  std::string refusal;
  auto taken = core::try_lock_run_dir(run_dir, refusal);
  if (!taken) return refusal;
  lock = std::move(*taken);
  if (resuming) return "";
  const auto existing = CheckpointStore::list(run_dir + "/checkpoints");
  if (existing.empty()) {
    if (!overwrite) return "";
  } else if (!overwrite) {
    return "run dir " + run_dir + " already holds " + describe_checkpoints(existing) +
           " of an earlier run, and this run was started fresh (no checkpoint.resume): continue "
           "that run with --resume=auto, start a new one with another run.dir, or pass "
           "--overwrite to move the earlier run aside into " +
           run_dir + "/" + core::kPreviousRunPrefix + "<n>/ (nothing is deleted)";
  }
  if (!core::run_dir_contents(run_dir).empty()) {
    const std::string dest = core::move_run_aside(run_dir);
    log::warn("--overwrite: moved the earlier run in " + run_dir + " (" +
              (existing.empty() ? std::string("no checkpoints") : describe_checkpoints(existing)) +
              ") aside into " + dest);
  }
  return "";
}

}  // namespace

core::FileLock claim_run_dir(const std::string& run_dir, bool resuming, bool overwrite,
                             dist::Group& group) {
  core::FileLock lock;
  std::string verdict;
  if (group.rank() == 0) {
    try {
      verdict = decide(run_dir, resuming, overwrite, lock);
    } catch (const std::exception& e) {
      verdict = std::string("cannot claim run dir ") + run_dir + ": " + e.what();
    }
  }
  verdict = dist::broadcast_text(group, verdict, 0);
  if (!verdict.empty()) throw UsageError(verdict);
  return lock;
}

}  // namespace lmtrain::train
