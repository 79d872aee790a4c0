// What every command that writes a run dir shares (train's claim, import hf, lora merge, the
// export commands' output dirs): the lock that keeps two writers apart, and moving an earlier
// run aside instead of deleting it.
//  - RUN_DIR/.lock is flock'ed by the writer for as long as it writes (core/file_lock.h); the
//    kernel drops it when the writer dies, so a killed run never leaves the directory locked;
//  - an earlier run that --overwrite replaces goes into RUN_DIR/previous-<n>/ (renames within
//    the directory: nothing is copied, nothing is deleted).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/file_lock.h"

namespace lmtrain::core {

inline constexpr const char* kRunDirLockFile = ".lock";
inline constexpr const char* kPreviousRunPrefix = "previous-";

// Takes DIR/.lock without waiting (DIR must exist). nullopt when another process holds it;
// `refusal` then says who ("run dir D is in use by pid N on host H (its lock is D/.lock): ...").
std::optional<FileLock> try_lock_run_dir(const std::string& dir, std::string& refusal);

// True for the names an earlier --overwrite made ("previous-3").
bool is_previous_run(const std::string& name);

// The entries of DIR other than its lock and earlier previous-* dirs: what an --overwrite would
// move aside (names only, sorted).
std::vector<std::string> run_dir_contents(const std::string& dir);

// Moves run_dir_contents(dir) into a new DIR/previous-<n>/ (one more than the highest there) and
// returns that path. Throws naming the entry that could not be moved; what was moved stays in
// previous-<n>, the rest in place: nothing is lost either way.
std::string move_run_aside(const std::string& dir);

// The same for some entries only: each DIR/<name> (a name may hold a '/': "checkpoints/step_5")
// goes to DIR/previous-<n>/<name>, its parent folders made as needed.
std::string move_aside(const std::string& dir, const std::vector<std::string>& names);

}  // namespace lmtrain::core
