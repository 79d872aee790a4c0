// SHA-256 (FIPS 180-4), used for checkpoint file checksums and tokenizer hashes.
// Self-contained so the checksum of a file never depends on which crypto library is installed.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace lmtrain::core {

// Incremental hasher: update() any number of times, then hex_digest() (or digest()) once.
class Sha256 {
 public:
  // allow_hardware=false forces the portable code (tests compare the two).
  explicit Sha256(bool allow_hardware = true);
  void update(const void* data, size_t n);
  void update(const std::string& s) { update(s.data(), s.size()); }
  // Finishes the hash; the object must not be updated afterwards.
  std::array<uint8_t, 32> digest();
  std::string hex_digest();

 private:
  void compress(const uint8_t* block);  // portable, one 64-byte block
  void compress_blocks(const uint8_t* blocks, size_t count);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_;
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
  bool finished_ = false;
  bool hardware_ = false;  // x86 SHA extensions present and allowed
};

// Lower-case hex digest of a memory buffer.
std::string sha256_hex(const void* data, size_t n);
inline std::string sha256_hex(const std::string& s) { return sha256_hex(s.data(), s.size()); }

// Lower-case hex digest of a file's contents, read in large chunks (files can be many GB).
// Throws lmtrain::Error naming the file if it cannot be read.
std::string sha256_file_hex(const std::string& path);

}  // namespace lmtrain::core
