#include "core/fs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "core/error.h"

namespace lmtrain::core {
namespace {

std::string errno_text() { return std::strerror(errno); }

// "<path>.tmp.<pid>": unique per process, and recognisable as debris if we crash mid-write.
std::string tmp_name_for(const std::string& path) {
  return path + ".tmp." + std::to_string(::getpid());
}

}  // namespace

std::string read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open " + path + ": " + errno_text());
  std::string out;
  struct stat st;
  if (::fstat(fd, &st) == 0 && st.st_size > 0) out.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    ssize_t got = ::read(fd, buf, sizeof(buf));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      std::string why = errno_text();
      ::close(fd);
      throw Error("error reading " + path + ": " + why);
    }
    if (got == 0) break;
    out.append(buf, static_cast<size_t>(got));
  }
  ::close(fd);
  return out;
}

AtomicFileWriter::AtomicFileWriter(std::string path)
    : path_(std::move(path)), tmp_path_(tmp_name_for(path_)) {
  fd_ = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw Error("cannot create " + tmp_path_ + " (to write " + path_ + "): " + errno_text());
}

AtomicFileWriter::~AtomicFileWriter() { abandon(); }

void AtomicFileWriter::abandon() noexcept {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
    ::unlink(tmp_path_.c_str());
  }
}

void AtomicFileWriter::write(const void* data, size_t n) {
  if (fd_ < 0) throw Error("write to " + path_ + " after it was committed or abandoned");
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t put = ::write(fd_, p, n);
    if (put < 0 && errno == EINTR) continue;
    if (put < 0) {
      std::string why = errno_text();
      abandon();
      throw Error("error writing " + path_ + " after " + std::to_string(written_) +
                  " bytes: " + why);
    }
    p += put;
    n -= static_cast<size_t>(put);
    written_ += static_cast<size_t>(put);
  }
}

void AtomicFileWriter::commit() {
  if (fd_ < 0) throw Error("commit of " + path_ + " after it was committed or abandoned");
  // fsync before rename: otherwise a crash can leave the new name pointing at empty blocks.
  if (::fsync(fd_) != 0) {
    std::string why = errno_text();
    abandon();
    throw Error("fsync failed for " + path_ + ": " + why);
  }
  if (::close(fd_) != 0) {
    std::string why = errno_text();
    fd_ = -1;
    ::unlink(tmp_path_.c_str());
    throw Error("close failed for " + path_ + ": " + why);
  }
  fd_ = -1;
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    std::string why = errno_text();
    ::unlink(tmp_path_.c_str());
    throw Error("cannot rename " + tmp_path_ + " to " + path_ + ": " + why);
  }
  fsync_path(parent_dir(path_));
}

void write_file_atomic(const std::string& path, const void* data, size_t n) {
  AtomicFileWriter w(path);
  w.write(data, n);
  w.commit();
}

void ensure_dir(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) throw Error("cannot create directory " + path + ": " + ec.message());
  if (!std::filesystem::is_directory(path, ec)) {
    throw Error("cannot create directory " + path + ": a non-directory is in the way");
  }
}

void fsync_path(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open " + path + " to fsync it: " + errno_text());
  int rc = ::fsync(fd);
  // Some filesystems refuse fsync on directories (EINVAL); durability is then best effort.
  std::string why = rc != 0 && errno != EINVAL ? errno_text() : "";
  ::close(fd);
  if (!why.empty()) throw Error("fsync failed for " + path + ": " + why);
}

std::string parent_dir(const std::string& path) {
  std::filesystem::path p(path);
  // "dir/" has an empty filename; its parent is "dir"'s parent.
  if (!p.has_filename()) p = p.parent_path();
  auto parent = p.parent_path();
  return parent.empty() ? "." : parent.string();
}

void atomic_symlink(const std::string& target, const std::string& link_path) {
  const std::string tmp = tmp_name_for(link_path);
  ::unlink(tmp.c_str());  // debris from an earlier crash of a process with our pid
  if (::symlink(target.c_str(), tmp.c_str()) != 0) {
    throw Error("cannot create symlink " + tmp + " -> " + target + ": " + errno_text());
  }
  // rename() replaces the old link in one step; there is no moment without a link.
  if (::rename(tmp.c_str(), link_path.c_str()) != 0) {
    std::string why = errno_text();
    ::unlink(tmp.c_str());
    throw Error("cannot point " + link_path + " at " + target + ": " + why);
  }
  fsync_path(parent_dir(link_path));
}

}  // namespace lmtrain::core
