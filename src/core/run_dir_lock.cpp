#include "core/run_dir_lock.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "core/error.h"
#include "core/fs.h"

namespace fs = std::filesystem;

namespace lmtrain::core {

std::optional<FileLock> try_lock_run_dir(const std::string& dir, std::string& refusal) {
  const std::string lock_path = dir + "/" + kRunDirLockFile;
  auto taken = FileLock::try_acquire(
      lock_path, "pid " + std::to_string(::getpid()) + " on host " + host_name() + "\n");
  if (!taken) {
    const std::string owner = FileLock::read_owner(lock_path);
    refusal = "run dir " + dir + " is in use by " +
              (owner.empty() ? std::string("another process") : owner) + " (its lock is " +
              lock_path + "): wait for that run to finish or stop it, or choose another directory";
  }
  return taken;
}

bool is_previous_run(const std::string& name) { return name.rfind(kPreviousRunPrefix, 0) == 0; }

std::vector<std::string> run_dir_contents(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name != kRunDirLockFile && !is_previous_run(name)) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string move_run_aside(const std::string& dir) {
  return move_aside(dir, run_dir_contents(dir));
}

std::string move_aside(const std::string& dir, const std::vector<std::string>& names) {
  // DIR/previous-<n>: one more than the highest already there.
  int64_t highest = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (!is_previous_run(name)) continue;
    try {
      highest = std::max<int64_t>(highest,
                                  std::stoll(name.substr(std::string(kPreviousRunPrefix).size())));
    } catch (const std::exception&) {
      // previous-foo: not ours to number
    }
  }
  const std::string dest = dir + "/" + kPreviousRunPrefix + std::to_string(highest + 1);
  ensure_dir(dest);
  for (const auto& name : names) {
    const std::string to = dest + "/" + name;
    ensure_dir(fs::path(to).parent_path().string());
    std::error_code ec;
    fs::rename(dir + "/" + name, to, ec);
    if (ec) {
      throw Error("cannot move " + dir + "/" + name + " aside into " + dest + ": " + ec.message());
    }
  }
  fsync_path(dir);
  return dest;
}

}  // namespace lmtrain::core
