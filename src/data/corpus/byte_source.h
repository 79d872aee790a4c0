// The bytes of one input file, decompressed while read when it is .gz (zlib) or .zst (libzstd):
// streaming with fixed buffers, so a file of any size costs the same memory.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "data/corpus/input_files.h"

namespace lmtrain::data {

constexpr size_t kDefaultReadBufferBytes = size_t{1} << 20;

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Up to n bytes of (decompressed) data into buf; 0 only at the end. Throws lmtrain::Error
  // naming the file when it cannot be read, is corrupt, or ends inside a compressed frame
  // (a truncated .gz / .zst).
  virtual size_t read(char* buf, size_t n) = 0;
  // Bytes of the file on disk consumed so far (compressed bytes for .gz / .zst): progress.
  virtual uint64_t raw_bytes_read() const = 0;
  // Bytes this source holds in buffers of its own (input and decompression state aside from
  // the library's fixed window): for the memory bound.
  virtual size_t buffer_bytes() const = 0;
  const std::string& path() const { return path_; }

 protected:
  explicit ByteSource(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// `buffer_bytes` sizes the read buffer of a compressed source (an uncompressed one reads
// straight into the caller's buffer).
std::unique_ptr<ByteSource> open_byte_source(const std::string& path, Compression compression,
                                             size_t buffer_bytes = kDefaultReadBufferBytes);

// Byte sources over memory, for the fuzz targets: `data` is the file's content as it would be
// on disk (compressed when `compression` says so); errors name `path`.
std::unique_ptr<ByteSource> open_memory_byte_source(std::string data, const std::string& path,
                                                    Compression compression,
                                                    size_t buffer_bytes = kDefaultReadBufferBytes);

}  // namespace lmtrain::data
