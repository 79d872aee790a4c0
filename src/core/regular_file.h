// Reading a file from a directory someone else controls (a run dir's metrics.jsonl, train.log,
// config.yaml, run_state.json, read back by `lmtrain report`): only a regular file is read, it is
// opened without blocking, and it is refused over a size cap. A FIFO in its place would
// otherwise hang the reader, and a symlink to /dev/zero would fill memory without end.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace lmtrain::core {

class RegularFile {
 public:
  // Throws lmtrain::Error naming `path` when it cannot be opened, is anything but a regular file
  // (saying what it is: a directory, a FIFO, a device, a socket), or holds more than max_bytes.
  RegularFile(const std::string& path, uint64_t max_bytes);
  ~RegularFile();
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;

  // Its size when it was opened: what readers read, so a file that grows meanwhile is read up
  // to that point and no further.
  uint64_t size() const { return size_; }
  // Device and inode, to tell the same file from a replaced one.
  uint64_t device() const { return dev_; }
  uint64_t inode() const { return ino_; }
  // Bytes [offset, offset + n) clipped to size(), read whole. Throws naming the path.
  std::string read(uint64_t offset, uint64_t n) const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0, dev_ = 0, ino_ = 0;
};

// The whole of a regular file of at most max_bytes.
std::string read_regular_file(const std::string& path, uint64_t max_bytes);

// "1.5 GiB", for the size caps' messages.
std::string byte_size_text(uint64_t bytes);

}  // namespace lmtrain::core
