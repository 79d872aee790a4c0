#include "checkpoint/run_dir_claim.h"

#include "checkpoint/checkpoint_store.h"
#include "checkpoint/rewind_guard.h"
#include "checkpoint/run_files.h"
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

// "a, b, c": the first few names and how many more.
std::string name_list(const std::vector<std::string>& names) {
  std::string out;
  const size_t shown = 6;
  for (size_t i = 0; i < names.size() && i < shown; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > shown) out += log::format(" and %zu more", names.size() - shown);
  return out;
}

// A resume from `from`: refused (or, with --overwrite, done after moving them aside) when its
// saves would replace checkpoints of a later timeline in this run dir. Resuming the run's own
// latest (auto, latest) continues that timeline: nothing lies after it.
std::string decide_rewind(const std::string& run_dir, const CheckpointRequest& resume,
                          const std::string& from, bool overwrite) {
  using Kind = CheckpointRequest::Kind;
  if (resume.kind == Kind::kAuto || resume.kind == Kind::kLatest) return "";
  const auto step = checkpoint_dir_step(from);
  if (!step) return "";
  const auto later = checkpoints_after(run_dir, *step);
  if (later.empty()) return "";
  if (!overwrite) {
    return "resuming " + from + " (step " + std::to_string(*step) + ") into run dir " + run_dir +
           " starts another timeline whose checkpoints would replace the later ones already "
           "there: " +
           name_list(later) + ". Pass --overwrite to move them aside into " + run_dir + "/" +
           core::kPreviousRunPrefix +
           "<n>/checkpoints/ first (nothing is deleted), or resume into " + "another run.dir";
  }
  const std::string dest = core::move_aside(run_dir, later);
  log::warn("--overwrite: resuming at step " + std::to_string(*step) +
            " moved the later checkpoints " + name_list(later) + " aside into " + dest +
            "/checkpoints/");
  return "";
}

// A fresh timeline (no checkpoint to resume) in a run dir without checkpoints: an abandoned
// run's files go aside so the new run's metrics.jsonl starts empty; a user's files are refused.
std::string decide_fresh_without_checkpoints(const std::string& run_dir) {
  std::vector<std::string> earlier;
  for (const auto& name : core::run_dir_contents(run_dir)) {
    if (name != kTeacherRunDir) earlier.push_back(name);  // a teacher run is resumed, not redone
  }
  if (earlier.empty()) return "";
  const auto foreign = foreign_files(earlier);
  if (!foreign.empty()) {
    return "run dir " + run_dir + " holds " + name_list(foreign) +
           ", which lmtrain did not write there, and this run would write its own files beside "
           "it: train into an empty or new run.dir, or pass --overwrite to move everything in it "
           "aside into " +
           run_dir + "/" + core::kPreviousRunPrefix + "<n>/ (nothing is deleted)";
  }
  const std::string dest = core::move_aside(run_dir, earlier);
  log::warn("run dir " + run_dir + " held the files of an earlier run that saved no checkpoint (" +
            name_list(earlier) + "): moved them aside into " + dest +
            ", so this run starts a fresh metrics.jsonl (nothing is deleted)");
  return "";
}

// Rank 0's verdict: "" to go ahead, else the refusal. `lock` receives the lock.
std::string decide(const std::string& run_dir, const CheckpointRequest& resume, bool overwrite,
                   core::FileLock& lock) {
  std::string refusal;
  auto taken = core::try_lock_run_dir(run_dir, refusal);
  if (!taken) return refusal;
  lock = std::move(*taken);
  std::optional<std::string> from;
  try {
    from = CheckpointStore::resolve(resume, run_dir);
  } catch (const Error&) {
    return "";  // a checkpoint that is not there: the run's set-up says so, in its words
  }
  if (from) return decide_rewind(run_dir, resume, *from, overwrite);
  // latest / best / a path that finds nothing: set-up refuses it, and nothing is moved.
  if (resume.any() && resume.kind != CheckpointRequest::Kind::kAuto) return "";
  const auto existing = CheckpointStore::list(run_dir + "/checkpoints");
  if (!overwrite) {
    if (existing.empty()) return decide_fresh_without_checkpoints(run_dir);
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

core::FileLock claim_run_dir(const std::string& run_dir, const CheckpointRequest& resume,
                             bool overwrite, dist::Group& group) {
  core::FileLock lock;
  std::string verdict;
  if (group.rank() == 0) {
    try {
      verdict = decide(run_dir, resume, overwrite, lock);
    } catch (const std::exception& e) {
      verdict = std::string("cannot claim run dir ") + run_dir + ": " + e.what();
    }
  }
  verdict = dist::broadcast_text(group, verdict, 0);
  if (!verdict.empty()) throw UsageError(verdict);
  return lock;
}

}  // namespace lmtrain::train
