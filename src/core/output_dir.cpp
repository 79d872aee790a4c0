#include "core/output_dir.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "core/error.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/run_dir_lock.h"

namespace fs = std::filesystem;

namespace lmtrain::core {
namespace {

fs::path resolved(const std::string& p) {
  std::error_code ec;
  auto r = fs::weakly_canonical(fs::absolute(p), ec);
  return ec ? fs::absolute(p).lexically_normal() : r;
}

bool inside(const fs::path& inner, const fs::path& outer) {
  auto i = inner.begin();
  for (auto o = outer.begin(); o != outer.end(); ++o, ++i) {
    if (o->empty()) continue;  // a trailing separator
    if (i == inner.end() || *i != *o) return false;
  }
  return true;
}

bool pid_alive(long pid) { return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM; }

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  const size_t shown = 6;
  for (size_t i = 0; i < names.size() && i < shown; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > shown) out += ", ... (" + std::to_string(names.size()) + " entries)";
  return out;
}

void rename_or_throw(const std::string& from, const std::string& to, const std::string& command) {
  std::error_code ec;
  fs::rename(from, to, ec);
  if (ec) throw Error(command + ": cannot move " + from + " to " + to + ": " + ec.message());
}

bool paths_overlap_resolved(const fs::path& a, const fs::path& b) {
  return inside(a, b) || inside(b, a);
}

// UsageError when `path` is, holds or lies inside one of options.inputs.
void refuse_overlap_with_inputs(const std::string& path, const OutputDirOptions& options) {
  for (const auto& input : options.inputs) {
    if (input.empty()) continue;
    const auto out = resolved(path), in = resolved(input);
    if (!paths_overlap_resolved(out, in)) continue;
    const char* relation = out == in ? "is" : inside(in, out) ? "holds" : "lies inside";
    throw UsageError(options.command + ": the output " + path + " " + relation +
                     " this command's input " + input +
                     ", which it must not change (not even with --overwrite): choose another "
                     "output");
  }
}

}  // namespace

bool paths_overlap(const std::string& a, const std::string& b) {
  return paths_overlap_resolved(resolved(a), resolved(b));
}

int remove_dead_writers_debris(const std::string& parent, const std::string& prefix) {
  int removed = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(parent, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const size_t end = name.find_first_not_of("0123456789", prefix.size());
    const std::string digits = name.substr(prefix.size(), end - prefix.size());
    if (digits.empty() || digits.size() > 9 || (end != std::string::npos && name[end] != '.')) {
      continue;
    }
    const long pid = std::stol(digits);
    if (pid <= 0 || pid_alive(pid)) continue;
    std::error_code rm;
    fs::remove_all(e.path(), rm);
    if (rm) {
      log::warn("cannot remove " + e.path().string() + ", left by a killed writer (pid " + digits +
                "): " + rm.message());
    } else {
      log::info("removed " + e.path().string() + ", left by a killed writer (pid " + digits + ")");
      ++removed;
    }
  }
  return removed;
}

void check_output_file(const std::string& path, const OutputDirOptions& options) {
  const std::string& cmd = options.command;
  refuse_overlap_with_inputs(path, options);
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    throw UsageError(cmd + ": the output " + path +
                     " is a directory: give the path of the file to write");
  }
  const std::string parent = parent_dir(path);
  if (!fs::is_directory(parent, ec)) {
    throw UsageError(cmd + ": the output's directory " + parent +
                     " does not exist: create it first");
  }
  if (fs::exists(path, ec) && !options.overwrite) {
    throw UsageError(cmd + ": the output " + path +
                     " already exists: choose another path, or pass --overwrite to replace it "
                     "once the new file is complete");
  }
  remove_dead_writers_debris(parent, fs::path(path).filename().string() + ".tmp.");
}

OutputDir::OutputDir(std::string path, OutputDirOptions options)
    : path_(std::move(path)), options_(std::move(options)) {
  const std::string& cmd = options_.command;
  while (path_.size() > 1 && path_.back() == '/') path_.pop_back();
  if (path_.empty()) throw UsageError(cmd + ": the output path is empty");
  refuse_overlap_with_inputs(path_, options_);
  std::error_code ec;
  const auto status = fs::status(path_, ec);
  existed_ = fs::exists(status);
  if (existed_ && !fs::is_directory(status)) {
    throw UsageError(cmd + ": the output " + path_ +
                     " exists and is not a directory: choose another output directory");
  }
  if (existed_) {
    std::string refusal;
    lock_ = try_lock_run_dir(path_, refusal);
    if (!lock_) throw UsageError(cmd + ": " + refusal);
    const auto held = run_dir_contents(path_);
    if (!held.empty() && !options_.overwrite) {
      throw UsageError(cmd + ": the output " + path_ + " already holds " + joined(held) +
                       ": choose another output directory, or pass --overwrite to move what it "
                       "holds aside into " +
                       path_ + "/" + kPreviousRunPrefix + "<n>/ (nothing is deleted)");
    }
  }
  const fs::path target(path_);
  const std::string parent = target.has_parent_path() ? target.parent_path().string() : ".";
  const std::string name = target.filename().string();
  // Missing parents are made, as `train` makes run.dir (`export hf RUN hf/tiny` in a fresh
  // checkout); a parent path that is a file is refused, naming it.
  if (!fs::is_directory(parent, ec)) {
    fs::create_directories(parent, ec);
    if (ec || !fs::is_directory(parent)) {
      throw UsageError(cmd + ": cannot make the output's parent directory " + parent + ": " +
                       (ec ? ec.message() : std::string("a file is in the way")));
    }
  }
  const std::string prefix = "." + name + ".tmp.";
  remove_dead_writers_debris(parent, prefix);
  if (options_.resumable) {
    staging_ = parent + "/." + name + ".partial";
    staging_existed_ = fs::is_directory(staging_, ec);
    ensure_dir(staging_);
    const std::string lock = staging_ + "/" + kRunDirLockFile;
    staging_lock_ =
        FileLock::try_acquire(lock, "pid " + std::to_string(::getpid()) + " on " + host_name());
    if (!staging_lock_) {
      throw UsageError(cmd + ": another " + cmd + " is writing " + path_ + " (its partial output " +
                       staging_ + " is locked by " + FileLock::read_owner(lock) +
                       "): wait for it to finish");
    }
    return;
  }
  staging_ = parent + "/" + prefix + std::to_string(::getpid());
  fs::remove_all(staging_, ec);  // our own pid's: an earlier OutputDir of this process
  ensure_dir(staging_);
}

void OutputDir::clear_staging() {
  for (const auto& e : fs::directory_iterator(staging_)) {
    if (e.path().filename() == kRunDirLockFile) continue;
    std::error_code ec;
    fs::remove_all(e.path(), ec);
    if (ec)
      throw Error(options_.command + ": cannot remove " + e.path().string() + ": " + ec.message());
  }
}

OutputDir::~OutputDir() {
  if (options_.resumable) return;  // kept for the next run to resume from
  if (committed_ || staging_.empty()) return;
  std::error_code ec;
  fs::remove_all(staging_, ec);
}

std::string OutputDir::commit() {
  const std::string& cmd = options_.command;
  fsync_path(staging_);
  if (!existed_) {
    // One rename: the output appears complete or not at all. It fails if another process made
    // a non-empty directory of that name in the meantime, which is then left alone.
    std::error_code ec;
    fs::rename(staging_, path_, ec);
    if (ec) {
      throw UsageError(cmd + ": the output " + path_ + " appeared while this command ran (" +
                       ec.message() + "): nothing was written into it; run the command again");
    }
    fsync_path(parent_dir(path_));
    committed_ = true;
    return "";
  }
  std::string aside;
  if (!run_dir_contents(path_).empty()) {
    aside = move_run_aside(path_);
    log::warn(cmd + " --overwrite: moved what " + path_ + " held aside into " + aside);
  }
  std::vector<std::string> names;
  bool has_checkpoints = false;
  for (const auto& e : fs::directory_iterator(staging_)) {
    const std::string name = e.path().filename().string();
    if (name == kRunDirLockFile) continue;  // the output has its own, held by this command
    if (name == "checkpoints") {
      has_checkpoints = true;
    } else {
      names.push_back(name);
    }
  }
  if (has_checkpoints) names.push_back("checkpoints");
  for (const auto& name : names) {
    rename_or_throw(staging_ + "/" + name, path_ + "/" + name, cmd);
  }
  fsync_path(path_);
  std::error_code ec;
  fs::remove_all(staging_, ec);
  committed_ = true;
  return aside;
}

}  // namespace lmtrain::core
