#include "core/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.h"

namespace lmtrain::core {
namespace {

const char* file_type_text(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

std::string byte_size_text(uint64_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}

RegularFile::RegularFile(const std::string& path, uint64_t max_bytes) : path_(path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, for ever.
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) throw Error("cannot read " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    throw Error("cannot read " + path + ": " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw Error("cannot read " + path + ": it is " + file_type_text(st.st_mode) +
                ", and only a regular file is read there");
  }
  size_ = static_cast<uint64_t>(st.st_size);
  dev_ = static_cast<uint64_t>(st.st_dev);
  ino_ = static_cast<uint64_t>(st.st_ino);
  if (size_ > max_bytes) {
    ::close(fd_);
    throw Error("cannot read " + path + ": it holds " + std::to_string(size_) +
                " bytes, more than the " + byte_size_text(max_bytes) + " (" +
                std::to_string(max_bytes) + " bytes) read at most");
  }
}

RegularFile::~RegularFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::string RegularFile::read(uint64_t offset, uint64_t n) const {
  if (offset >= size_) return "";
  n = std::min(n, size_ - offset);
  std::string out(static_cast<size_t>(n), '\0');
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t r =
        ::pread(fd_, out.data() + got, out.size() - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw Error("cannot read " + path_ + ": " + std::strerror(errno));
    if (r == 0) break;  // cut short since it was opened
    got += static_cast<size_t>(r);
  }
  out.resize(got);
  return out;
}

std::string read_regular_file(const std::string& path, uint64_t max_bytes) {
  RegularFile f(path, max_bytes);
  return f.read(0, f.size());
}

}  // namespace lmtrain::core
