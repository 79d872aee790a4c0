// Binary token shards: a 64-byte little-endian header followed by the token ids.
//
//   offset  size  field
//        0     8  magic "LMTSHARD"
//        8     4  uint32 version (1)
//       12     4  uint32 dtype_bytes: 2 (uint16 ids) or 4 (uint32 ids)
//       16     8  uint64 num_tokens
//       24    32  tokenizer hash, ASCII, zero padded (ties the shard to its tokenizer)
//       56     8  reserved, zero
//       64     -  num_tokens ids of dtype_bytes each, little-endian
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace lmtrain::data {

constexpr size_t kShardHeaderBytes = 64;
constexpr uint32_t kShardVersion = 1;

// 2 when every id of a vocabulary of this size fits in uint16, else 4.
int shard_dtype_for_vocab(size_t vocab_size);

// Streams tokens into a shard. The file appears at `path` only after finish() (written to a
// temporary file and renamed), so readers never see a partial shard.
class ShardWriter {
 public:
  ShardWriter(const std::string& path, int dtype_bytes, const std::string& tokenizer_hash);
  ~ShardWriter();  // without finish(): removes the temporary file
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // Throws if an id does not fit dtype_bytes.
  void append(const uint32_t* ids, size_t n);
  void append(const std::vector<uint32_t>& ids) { append(ids.data(), ids.size()); }
  uint64_t num_tokens() const { return num_tokens_; }
  void finish();

 private:
  std::string path_, tmp_path_;
  int dtype_bytes_;
  std::string hash_;
  std::FILE* file_ = nullptr;
  uint64_t num_tokens_ = 0;
  std::vector<unsigned char> buf_;
};

void write_shard(const std::string& path, const std::vector<uint32_t>& tokens, int dtype_bytes,
                 const std::string& tokenizer_hash);

// A read-only memory-mapped shard. Validates the header and the file size on open.
class TokenShard {
 public:
  explicit TokenShard(const std::string& path);
  ~TokenShard();
  TokenShard(TokenShard&& other) noexcept;
  TokenShard& operator=(TokenShard&& other) noexcept;
  TokenShard(const TokenShard&) = delete;
  TokenShard& operator=(const TokenShard&) = delete;

  const std::string& path() const { return path_; }
  size_t size() const { return num_tokens_; }
  int dtype_bytes() const { return dtype_bytes_; }
  const std::string& tokenizer_hash() const { return hash_; }

  // Ids read from now on must be < vocab_size (the tokenizer's vocabulary): at() and
  // copy_window() check each id they read (one compare per token) and throw an Error naming
  // the file, the byte offset and the bad id, instead of letting an embedding lookup fail deep
  // inside libtorch. 0 = unchecked (the default).
  void set_vocab_size(size_t vocab_size) { vocab_size_ = vocab_size; }
  size_t vocab_size() const { return vocab_size_; }

  // Token i; throws if i >= size().
  uint32_t at(size_t i) const;
  // out[k] = token(start + k) for k < len; throws if the window leaves the shard.
  void copy_window(size_t start, size_t len, int64_t* out) const;

 private:
  void release();
  [[noreturn]] void bad_id(size_t index, uint32_t id) const;
  std::string path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const unsigned char* data_ = nullptr;  // first token
  size_t num_tokens_ = 0;
  int dtype_bytes_ = 0;
  size_t vocab_size_ = 0;
  std::string hash_;
};

}  // namespace lmtrain::data
