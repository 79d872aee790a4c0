#include "data/token_shard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace lmtrain::data {
namespace {

constexpr char kMagic[8] = {'L', 'M', 'T', 'S', 'H', 'A', 'R', 'D'};
constexpr size_t kHashBytes = 32;

// Token data is read by memcpy / pointer casts, which assumes a little-endian host (x86, ARM).
bool host_is_little_endian() {
  const uint16_t probe = 1;
  unsigned char first;
  std::memcpy(&first, &probe, 1);
  return first == 1;
}

void put_le(unsigned char* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

uint64_t get_le(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void check_dtype(int dtype_bytes, const std::string& path) {
  if (dtype_bytes != 2 && dtype_bytes != 4) {
    throw Error("shard " + path + ": dtype_bytes must be 2 or 4, got " +
                std::to_string(dtype_bytes));
  }
}

}  // namespace

int shard_dtype_for_vocab(size_t vocab_size) { return vocab_size <= 65536 ? 2 : 4; }

ShardWriter::ShardWriter(const std::string& path, int dtype_bytes,
                         const std::string& tokenizer_hash)
    : path_(path),
      tmp_path_(path + ".tmp." + std::to_string(getpid())),
      dtype_bytes_(dtype_bytes),
      hash_(tokenizer_hash.substr(0, kHashBytes)) {
  check_dtype(dtype_bytes, path);
  if (!host_is_little_endian()) throw Error("token shards need a little-endian host");
  file_ = std::fopen(tmp_path_.c_str(), "wb");
  if (!file_) {
    throw Error("cannot create shard " + tmp_path_ + ": " + std::strerror(errno));
  }
  // Header placeholder; the real one (with num_tokens) is written by finish().
  unsigned char zeros[kShardHeaderBytes] = {};
  if (std::fwrite(zeros, 1, sizeof(zeros), file_) != sizeof(zeros)) {
    throw Error("error writing shard " + tmp_path_);
  }
}

ShardWriter::~ShardWriter() {
  if (file_) {
    std::fclose(file_);
    std::remove(tmp_path_.c_str());
  }
}

void ShardWriter::append(const uint32_t* ids, size_t n) {
  if (!file_) throw Error("shard " + path_ + " is already finished");
  buf_.resize(n * dtype_bytes_);
  if (dtype_bytes_ == 2) {
    for (size_t i = 0; i < n; ++i) {
      if (ids[i] > 0xFFFF) {
        throw Error("token id " + std::to_string(ids[i]) + " does not fit the uint16 shard " +
                    path_);
      }
      put_le(&buf_[2 * i], ids[i], 2);
    }
  } else {
    std::memcpy(buf_.data(), ids, n * 4);  // little-endian host
  }
  if (std::fwrite(buf_.data(), 1, buf_.size(), file_) != buf_.size()) {
    throw Error("error writing shard " + tmp_path_ + ": " + std::strerror(errno));
  }
  num_tokens_ += n;
}

void ShardWriter::finish() {
  if (!file_) throw Error("shard " + path_ + " is already finished");
  unsigned char header[kShardHeaderBytes] = {};
  std::memcpy(header, kMagic, 8);
  put_le(header + 8, kShardVersion, 4);
  put_le(header + 12, static_cast<uint64_t>(dtype_bytes_), 4);
  put_le(header + 16, num_tokens_, 8);
  std::memcpy(header + 24, hash_.data(), hash_.size());
  const bool ok = std::fseek(file_, 0, SEEK_SET) == 0 &&
                  std::fwrite(header, 1, sizeof(header), file_) == sizeof(header) &&
                  std::fflush(file_) == 0;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!ok || !closed) {
    std::remove(tmp_path_.c_str());
    throw Error("error writing shard " + tmp_path_ + ": " + std::strerror(errno));
  }
  std::error_code ec;
  std::filesystem::rename(tmp_path_, path_, ec);
  if (ec) {
    std::remove(tmp_path_.c_str());
    throw Error("cannot rename " + tmp_path_ + " to " + path_ + ": " + ec.message());
  }
}

void write_shard(const std::string& path, const std::vector<uint32_t>& tokens, int dtype_bytes,
                 const std::string& tokenizer_hash) {
  ShardWriter writer(path, dtype_bytes, tokenizer_hash);
  writer.append(tokens);
  writer.finish();
}

TokenShard::TokenShard(const std::string& path) : path_(path) {
  if (!host_is_little_endian()) throw Error("token shards need a little-endian host");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open shard " + path + ": " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw Error("cannot stat shard " + path + ": " + std::strerror(errno));
  }
  const size_t file_bytes = static_cast<size_t>(st.st_size);
  if (file_bytes < kShardHeaderBytes) {
    ::close(fd);
    throw Error("shard " + path + " is too small (" + std::to_string(file_bytes) +
                " bytes) to hold a header; truncated or not a shard");
  }
  map_ = ::mmap(nullptr, file_bytes, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);  // the mapping keeps the file alive
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw Error("cannot mmap shard " + path + ": " + std::strerror(errno));
  }
  map_bytes_ = file_bytes;
  try {
    const auto* h = static_cast<const unsigned char*>(map_);
    if (std::memcmp(h, kMagic, 8) != 0) {
      throw Error("file " + path + " is not an lmtrain token shard (bad magic)");
    }
    const uint64_t version = get_le(h + 8, 4);
    if (version != kShardVersion) {
      throw Error("shard " + path + " has version " + std::to_string(version) +
                  "; this build reads version " + std::to_string(kShardVersion));
    }
    dtype_bytes_ = static_cast<int>(get_le(h + 12, 4));
    check_dtype(dtype_bytes_, path);
    const uint64_t n = get_le(h + 16, 8);
    if (n > (file_bytes - kShardHeaderBytes) / dtype_bytes_ ||
        kShardHeaderBytes + n * dtype_bytes_ != file_bytes) {
      throw Error("shard " + path + " is truncated or corrupt: header says " + std::to_string(n) +
                  " tokens (" + std::to_string(kShardHeaderBytes + n * dtype_bytes_) +
                  " bytes) but the file has " + std::to_string(file_bytes) + " bytes");
    }
    num_tokens_ = n;
    const char* hp = reinterpret_cast<const char*>(h + 24);
    hash_.assign(hp, strnlen(hp, kHashBytes));
    data_ = h + kShardHeaderBytes;
    // Training reads random windows; tell the kernel not to bother with read-ahead.
    ::madvise(map_, map_bytes_, MADV_RANDOM);
  } catch (...) {
    release();
    throw;
  }
}

TokenShard::~TokenShard() { release(); }

void TokenShard::release() {
  if (map_) ::munmap(map_, map_bytes_);
  map_ = nullptr;
  data_ = nullptr;
}

TokenShard::TokenShard(TokenShard&& o) noexcept { *this = std::move(o); }

TokenShard& TokenShard::operator=(TokenShard&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::move(o.path_);
    map_ = o.map_;
    map_bytes_ = o.map_bytes_;
    data_ = o.data_;
    num_tokens_ = o.num_tokens_;
    dtype_bytes_ = o.dtype_bytes_;
    vocab_size_ = o.vocab_size_;
    hash_ = std::move(o.hash_);
    o.map_ = nullptr;
    o.data_ = nullptr;
    o.num_tokens_ = 0;
  }
  return *this;
}

void TokenShard::bad_id(size_t index, uint32_t id) const {
  throw Error("token shard " + path_ + ": token id " + std::to_string(id) + " at byte offset " +
              std::to_string(kShardHeaderBytes + index * dtype_bytes_) + " (token " +
              std::to_string(index) + ") is outside the tokenizer's vocabulary of " +
              std::to_string(vocab_size_) +
              " ids: the shard is corrupt or was made with another tokenizer (re-run `lmtrain "
              "prepare`)");
}

uint32_t TokenShard::at(size_t i) const {
  if (i >= num_tokens_) {
    throw Error("token index " + std::to_string(i) + " is outside shard " + path_ + " (" +
                std::to_string(num_tokens_) + " tokens)");
  }
  uint32_t v;
  if (dtype_bytes_ == 2) {
    uint16_t v16;
    std::memcpy(&v16, data_ + 2 * i, 2);
    v = v16;
  } else {
    std::memcpy(&v, data_ + 4 * i, 4);
  }
  if (vocab_size_ && v >= vocab_size_) bad_id(i, v);
  return v;
}

void TokenShard::copy_window(size_t start, size_t len, int64_t* out) const {
  if (start > num_tokens_ || len > num_tokens_ - start) {
    throw Error("window [" + std::to_string(start) + ", " + std::to_string(start + len) +
                ") is outside shard " + path_ + " (" + std::to_string(num_tokens_) + " tokens)");
  }
  // memcpy per element compiles to a plain load (the data is not necessarily aligned).
  uint32_t max_id = 0;
  if (dtype_bytes_ == 2) {
    const unsigned char* p = data_ + 2 * start;
    for (size_t k = 0; k < len; ++k) {
      uint16_t v;
      std::memcpy(&v, p + 2 * k, 2);
      out[k] = v;
      max_id = std::max<uint32_t>(max_id, v);
    }
  } else {
    const unsigned char* p = data_ + 4 * start;
    for (size_t k = 0; k < len; ++k) {
      uint32_t v;
      std::memcpy(&v, p + 4 * k, 4);
      out[k] = v;
      max_id = std::max(max_id, v);
    }
  }
  // The common case costs one compare per window; the scan for the culprit only runs on error.
  if (vocab_size_ && max_id >= vocab_size_) {
    for (size_t k = 0; k < len; ++k) {
      if (static_cast<uint64_t>(out[k]) >= vocab_size_)
        bad_id(start + k, static_cast<uint32_t>(out[k]));
    }
  }
}

}  // namespace lmtrain::data
