// An exclusive advisory lock on a file (flock), held while the FileLock lives. The kernel drops
// it when the holder's last descriptor closes, so a process that dies however it dies (kill -9,
// a crash, a lost node's reboot) never leaves it behind. The holder writes a line about itself
// into the file ("pid 1234 on host h") so that a refused process can say who holds it.
#pragma once
#include <optional>
#include <string>

namespace lmtrain::core {

class FileLock {
 public:
  FileLock() = default;
  ~FileLock();
  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  // Creates `path` if needed and takes the lock without waiting; nullopt when another open
  // file (this process's included) holds it. On success the file's content becomes `owner`.
  // Throws lmtrain::Error naming the path when it cannot be opened.
  static std::optional<FileLock> try_acquire(const std::string& path, const std::string& owner);

  // What the current holder wrote ("" if unreadable or not yet written).
  static std::string read_owner(const std::string& path);

  bool held() const { return fd_ >= 0; }

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// This machine's host name ("?" when it has none).
std::string host_name();

}  // namespace lmtrain::core
