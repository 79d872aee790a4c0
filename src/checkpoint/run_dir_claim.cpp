#include "checkpoint/run_dir_claim.h"

#include <unistd.h>

#include <filesystem>
#include <system_error>

#include "checkpoint/checkpoint_store.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/log.h"
#include "distributed/host_collectives.h"

namespace fs = std::filesystem;

namespace lmtrain::train {
namespace {

bool is_previous_run(const std::string& name) { return name.rfind(kPreviousRunPrefix, 0) == 0; }

// RUN_DIR/previous-<n>: one more than the highest already there.
std::string next_previous_dir(const std::string& run_dir) {
  int64_t highest = 0;
  for (const auto& e : fs::directory_iterator(run_dir)) {
    const std::string name = e.path().filename().string();
    if (!is_previous_run(name)) continue;
    try {
      highest = std::max<int64_t>(highest,
                                  std::stoll(name.substr(std::string(kPreviousRunPrefix).size())));
    } catch (const std::exception&) {
      // previous-foo: not ours to number
    }
  }
  return run_dir + "/" + kPreviousRunPrefix + std::to_string(highest + 1);
}

// Everything of the earlier run (all but the lock and earlier previous-* dirs) into `dest`.
// Renames within one directory: nothing is copied and nothing is deleted.
void move_run_aside(const std::string& run_dir, const std::string& dest) {
  core::ensure_dir(dest);
  const std::string dest_name = fs::path(dest).filename().string();
  for (const auto& e : fs::directory_iterator(run_dir)) {
    const std::string name = e.path().filename().string();
    if (name == kRunDirLockFile || is_previous_run(name) || name == dest_name) continue;
    std::error_code ec;
    fs::rename(e.path(), dest + "/" + name, ec);
    if (ec)
      throw Error("--overwrite: cannot move " + e.path().string() + " into " + dest + ": " +
                  ec.message());
  }
  core::fsync_path(run_dir);
}

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
  const std::string lock_path = run_dir + "/" + kRunDirLockFile;
  auto taken = core::FileLock::try_acquire(
      lock_path, "pid " + std::to_string(::getpid()) + " on host " + core::host_name() + "\n");
  if (!taken) {
    const std::string owner = core::FileLock::read_owner(lock_path);
    return "run dir " + run_dir + " is in use by " +
           (owner.empty() ? std::string("another process") : owner) + " (its lock is " + lock_path +
           "): wait for that run to finish or stop it, or give this one another run.dir";
  }
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
           run_dir + "/" + kPreviousRunPrefix + "<n>/ (nothing is deleted)";
  }
  bool anything = false;
  for (const auto& e : fs::directory_iterator(run_dir)) {
    const std::string name = e.path().filename().string();
    anything |= name != kRunDirLockFile && !is_previous_run(name);
  }
  if (anything) {
    const std::string dest = next_previous_dir(run_dir);
    move_run_aside(run_dir, dest);
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
