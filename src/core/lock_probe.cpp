#include "core/lock_probe.h"

#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace lmtrain::core {

bool flock_listed(const std::string& proc_locks, unsigned long long inode) {
  // "1: FLOCK  ADVISORY  WRITE 8744 fe:00:10953224 0 EOF"; a waiter's line has "->" after the
  // number and holds nothing.
  std::istringstream lines(proc_locks);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string id, kind, mode, access, pid, where;
    if (!(words >> id >> kind)) continue;
    if (kind != "FLOCK") continue;  // "->" (waiting), POSIX, OFDLCK, LEASE: not our lock
    if (!(words >> mode >> access >> pid >> where)) continue;
    unsigned maj = 0, min = 0;
    unsigned long long ino = 0;
    if (std::sscanf(where.c_str(), "%x:%x:%llu", &maj, &min, &ino) != 3) continue;
    if (ino == inode) return true;
  }
  return false;
}

std::optional<bool> flock_held(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  std::ifstream in("/proc/locks");
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return flock_listed(text.str(), static_cast<unsigned long long>(st.st_ino));
}

}  // namespace lmtrain::core
