// Writing a whole output directory without ever losing what is already there: the run that
// `import hf` or `lora merge` makes, the folder of `export hf` or `export peft`.
//  - Inputs are never written: an output that is, holds or lies inside one of the command's
//    inputs is refused, --overwrite or not (UsageError naming both).
//  - An existing output is locked with the run-dir lock (core/run_dir_lock.h) for the whole
//    command, so a live `train` (or another writer) is refused, naming its pid and host.
//  - An output that already holds anything (but the lock and previous-* dirs) is refused,
//    naming what it holds, unless `overwrite`; with it the earlier content is moved aside into
//    OUT/previous-<n>/, as `train --overwrite` does: nothing is deleted.
//  - Everything is written into a temporary sibling PARENT/.NAME.tmp.<pid> and moved into place
//    only once complete (a fresh output: one rename of the directory), so a kill at any point
//    leaves the old output as it was. A later command removes siblings whose pid is dead.
//  - A resumable command (`prepare`, hours of work) stages into PARENT/.NAME.partial instead,
//    locked while it writes (its .lock) and kept when the command dies or fails, so the next
//    run of the command finds what was finished there and goes on from it.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/file_lock.h"

namespace lmtrain::core {

struct OutputDirOptions {
  std::string command;              // "import hf": prefixes every refusal
  std::vector<std::string> inputs;  // the paths the command reads (files or directories)
  bool overwrite = false;
  // Stage into PARENT/.NAME.partial, kept when not committed (see above).
  bool resumable = false;
};

class OutputDir {
 public:
  // Checks `path` (see above), locks it when it exists, removes dead writers' temporary
  // siblings and creates this one's. Throws UsageError (exit code 2) on a refusal.
  OutputDir(std::string path, OutputDirOptions options);
  ~OutputDir();  // removes the temporary sibling unless committed
  OutputDir(const OutputDir&) = delete;
  OutputDir& operator=(const OutputDir&) = delete;

  // Where the command writes its files; their names are the output's.
  const std::string& staging() const { return staging_; }
  const std::string& path() const { return path_; }
  // Resumable: the staging dir was left by an earlier run (it may hold finished work).
  bool staging_existed() const { return staging_existed_; }
  // Resumable: empties the staging dir (but its lock), to start over.
  void clear_staging();

  // Moves the staged files into place (the earlier content aside first, with `overwrite`) and
  // returns where the earlier content went ("" when there was none). Entries named
  // "checkpoints" move last, so a run appears with its checkpoints complete.
  std::string commit();

 private:
  std::string path_;
  std::string staging_;
  OutputDirOptions options_;
  bool existed_ = false;
  bool committed_ = false;
  bool staging_existed_ = false;
  std::optional<FileLock> lock_;
  std::optional<FileLock> staging_lock_;  // resumable: held on STAGING/.lock
};

// True when `a` and `b` name the same place or one lies inside the other (after resolving
// symlinks and `..`; paths that do not exist yet are resolved as far as they do).
bool paths_overlap(const std::string& a, const std::string& b);

// The same rules for a command that writes one file through core::AtomicFileWriter
// (distill-cache): refused when `path` is a directory, its parent does not exist, it is or lies
// inside an input, or (without options.overwrite) it exists. Removes the temporaries that killed
// writers left beside it (PATH.tmp.<pid>[.*]).
void check_output_file(const std::string& path, const OutputDirOptions& options);

// Removes PARENT/<prefix><pid> and PARENT/<prefix><pid>.* entries (files or directories) whose
// pid is not a live process on this host: the debris of a writer that was killed. Returns how
// many it removed.
int remove_dead_writers_debris(const std::string& parent, const std::string& prefix);

}  // namespace lmtrain::core
