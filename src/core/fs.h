// File helpers with crash-safe semantics: a file or symlink replaced through these either keeps
// its old content or has the complete new one, never a torn mix (write tmp, fsync, rename).
#pragma once
#include <cstddef>
#include <string>

namespace lmtrain::core {

// Whole file as bytes. Throws lmtrain::Error naming `path` if it cannot be read.
std::string read_file(const std::string& path);

// Writes a file that becomes visible under `path` only once fully written and durable:
// bytes go to "<path>.tmp.<pid>", which is fsynced, renamed over `path`, and the directory
// fsynced. If the object is destroyed without commit() the temporary file is removed and
// `path` is untouched. Streams, so large files need no in-memory copy.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::string path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* data, size_t n);
  void write(const std::string& s) { write(s.data(), s.size()); }
  // fsync + rename + fsync(parent dir). Throws on failure (the old file stays in place).
  void commit();
  const std::string& path() const { return path_; }

 private:
  void abandon() noexcept;

  std::string path_;
  std::string tmp_path_;
  int fd_ = -1;
  size_t written_ = 0;
};

// write_file via AtomicFileWriter in one call.
void write_file_atomic(const std::string& path, const void* data, size_t n);
inline void write_file_atomic(const std::string& path, const std::string& bytes) {
  write_file_atomic(path, bytes.data(), bytes.size());
}

// mkdir -p. Throws naming the path if it cannot be created or exists as a non-directory.
void ensure_dir(const std::string& path);

// fsync a file or a directory (directories: makes renames/creations inside them durable).
void fsync_path(const std::string& path);
// The directory holding `path` ("." for a bare name).
std::string parent_dir(const std::string& path);

// Points `link_path` at `target` (stored verbatim, so relative targets stay relative),
// replacing any existing symlink atomically: readers see the old or the new link, never none.
void atomic_symlink(const std::string& target, const std::string& link_path);

}  // namespace lmtrain::core
