#include "data/corpus/byte_source.h"

#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace lmtrain::data {
namespace {

// Where compressed bytes come from: a file, or memory (fuzzing).
class RawInput {
 public:
  virtual ~RawInput() = default;
  virtual size_t read(char* buf, size_t n) = 0;  // 0 at the end
  uint64_t consumed() const { return consumed_; }

 protected:
  uint64_t consumed_ = 0;
};

class FileInput : public RawInput {
 public:
  explicit FileInput(const std::string& path) : path_(path) {
    file_ = std::fopen(path.c_str(), "rb");
    if (!file_) throw Error("cannot open input file " + path + ": " + std::strerror(errno));
  }
  ~FileInput() override { std::fclose(file_); }
  size_t read(char* buf, size_t n) override {
    const size_t got = std::fread(buf, 1, n, file_);
    if (got < n && std::ferror(file_)) {
      throw Error("error reading input file " + path_ + ": " + std::strerror(errno));
    }
    consumed_ += got;
    return got;
  }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

class MemoryInput : public RawInput {
 public:
  explicit MemoryInput(std::string data) : data_(std::move(data)) {}
  size_t read(char* buf, size_t n) override {
    const size_t got = std::min(n, data_.size() - pos_);
    std::memcpy(buf, data_.data() + pos_, got);
    pos_ += got;
    consumed_ += got;
    return got;
  }

 private:
  std::string data_;
  size_t pos_ = 0;
};

class PlainSource : public ByteSource {
 public:
  PlainSource(std::string path, std::unique_ptr<RawInput> in)
      : ByteSource(std::move(path)), in_(std::move(in)) {}
  size_t read(char* buf, size_t n) override { return in_->read(buf, n); }
  uint64_t raw_bytes_read() const override { return in_->consumed(); }
  size_t buffer_bytes() const override { return 0; }

 private:
  std::unique_ptr<RawInput> in_;
};

// What the decompressing sources share: the compressed input and its buffer, refilled whole.
class CompressedSource : public ByteSource {
 protected:
  CompressedSource(std::string path, std::unique_ptr<RawInput> in, size_t buffer_bytes)
      : ByteSource(std::move(path)),
        in_(std::move(in)),
        buf_(std::max<size_t>(buffer_bytes, 4096)) {}

  // Reads the next compressed bytes into buf_: how many (0 at the end of the input, which
  // sets eof_). An empty file is refused as not being `format` data.
  size_t refill_buffer(const char* format) {
    const size_t got = in_->read(buf_.data(), buf_.size());
    if (got == 0) {
      eof_ = true;
      if (in_->consumed() == 0) {
        throw Error("input file " + path_ + " is empty: not " + format + " data");
      }
    }
    return got;
  }

 public:
  size_t buffer_bytes() const override { return buf_.size(); }

 protected:
  std::unique_ptr<RawInput> in_;
  std::vector<char> buf_;
  bool eof_ = false;
};

// gzip (and zlib) streams, several concatenated members included (what `cat a.gz b.gz` and
// pigz make).
class GzipSource : public CompressedSource {
 public:
  GzipSource(std::string path, std::unique_ptr<RawInput> in, size_t buffer_bytes)
      : CompressedSource(std::move(path), std::move(in), buffer_bytes) {
    std::memset(&z_, 0, sizeof(z_));
    if (inflateInit2(&z_, 15 + 32) != Z_OK) throw Error("zlib: cannot start inflate for " + path_);
  }
  ~GzipSource() override { inflateEnd(&z_); }

  size_t read(char* out, size_t n) override {
    size_t produced = 0;
    while (produced < n) {
      if (z_.avail_in == 0 && !eof_) refill();
      const bool no_input = z_.avail_in == 0 && eof_;
      if (no_input && !in_member_) break;  // the end, right after a complete member
      if (!in_member_) {                   // more bytes after a member: the next one starts
        inflateReset(&z_);
        in_member_ = true;
      }
      z_.next_out = reinterpret_cast<Bytef*>(out + produced);
      z_.avail_out = static_cast<uInt>(std::min<size_t>(n - produced, 1u << 30));
      const uInt before = z_.avail_out;
      const int rc = inflate(&z_, Z_NO_FLUSH);
      produced += before - z_.avail_out;
      if (rc == Z_STREAM_END) {
        in_member_ = false;
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        throw Error("input file " + path_ + " is not valid gzip data (" +
                    (z_.msg ? std::string(z_.msg) : "zlib error " + std::to_string(rc)) +
                    ") near compressed byte " + std::to_string(raw_bytes_read()));
      } else if (no_input && before == z_.avail_out) {
        throw Error("input file " + path_ + " is truncated: its gzip stream ends early (after " +
                    std::to_string(in_->consumed()) + " compressed bytes)");
      }
    }
    return produced;
  }
  uint64_t raw_bytes_read() const override { return in_->consumed() - z_.avail_in; }

 private:
  void refill() {
    const size_t got = refill_buffer("gzip");
    if (got == 0) return;
    z_.next_in = reinterpret_cast<Bytef*>(buf_.data());
    z_.avail_in = static_cast<uInt>(got);
  }

  z_stream z_;
  bool in_member_ = true;
};

// zstd frames (several concatenated included).
class ZstdSource : public CompressedSource {
 public:
  ZstdSource(std::string path, std::unique_ptr<RawInput> in, size_t buffer_bytes)
      : CompressedSource(std::move(path), std::move(in), buffer_bytes) {
    ds_ = ZSTD_createDStream();
    if (!ds_) throw Error("zstd: cannot create a decompression stream for " + path_);
    ZSTD_initDStream(ds_);
  }
  ~ZstdSource() override { ZSTD_freeDStream(ds_); }

  size_t read(char* out, size_t n) override {
    ZSTD_outBuffer ob{out, n, 0};
    while (ob.pos < ob.size) {
      if (in_buf_.pos == in_buf_.size && !eof_) refill();
      const bool no_input = in_buf_.pos == in_buf_.size && eof_;
      // A hint of 0: the last frame is decoded and flushed, so the end of input is the end.
      if (no_input && last_hint_ == 0) break;
      const size_t before = ob.pos;
      const size_t rc = ZSTD_decompressStream(ds_, &ob, &in_buf_);
      if (ZSTD_isError(rc)) {
        throw Error("input file " + path_ + " is not valid zstd data (" + ZSTD_getErrorName(rc) +
                    ") near compressed byte " + std::to_string(raw_bytes_read()));
      }
      last_hint_ = rc;
      if (no_input && ob.pos == before && rc != 0) {
        throw Error("input file " + path_ + " is truncated: its zstd frame ends early (after " +
                    std::to_string(in_->consumed()) + " compressed bytes)");
      }
    }
    return ob.pos;
  }
  uint64_t raw_bytes_read() const override {
    return in_->consumed() - (in_buf_.size - in_buf_.pos);
  }

 private:
  void refill() {
    const size_t got = refill_buffer("zstd");
    if (got == 0) return;
    in_buf_ = ZSTD_inBuffer{buf_.data(), got, 0};
  }

  ZSTD_DStream* ds_ = nullptr;
  ZSTD_inBuffer in_buf_{nullptr, 0, 0};
  size_t last_hint_ = 1;  // ZSTD_decompressStream's last result: 0 = a frame just ended
};

std::unique_ptr<ByteSource> make_source(std::unique_ptr<RawInput> in, const std::string& path,
                                        Compression compression, size_t buffer_bytes) {
  switch (compression) {
    case Compression::kGzip:
      return std::make_unique<GzipSource>(path, std::move(in), buffer_bytes);
    case Compression::kZstd:
      return std::make_unique<ZstdSource>(path, std::move(in), buffer_bytes);
    default:
      return std::make_unique<PlainSource>(path, std::move(in));
  }
}

}  // namespace

std::unique_ptr<ByteSource> open_byte_source(const std::string& path, Compression compression,
                                             size_t buffer_bytes) {
  return make_source(std::make_unique<FileInput>(path), path, compression, buffer_bytes);
}

std::unique_ptr<ByteSource> open_memory_byte_source(std::string data, const std::string& path,
                                                    Compression compression, size_t buffer_bytes) {
  return make_source(std::make_unique<MemoryInput>(std::move(data)), path, compression,
                     buffer_bytes);
}

}  // namespace lmtrain::data
