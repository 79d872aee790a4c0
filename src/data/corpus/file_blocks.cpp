#include "data/corpus/file_blocks.h"

#include <sys/types.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "data/corpus/byte_source.h"

namespace lmtrain::data {
namespace {

// Random access to an uncompressed file, for the few reads around a block boundary.
class BoundaryScanner {
 public:
  explicit BoundaryScanner(const InputFile& file) : path_(file.path), size_(file.size) {
    file_ = std::fopen(path_.c_str(), "rb");
    if (!file_) throw Error("cannot open input file " + path_ + ": " + std::strerror(errno));
  }
  ~BoundaryScanner() { std::fclose(file_); }
  BoundaryScanner(const BoundaryScanner&) = delete;
  BoundaryScanner& operator=(const BoundaryScanner&) = delete;

  uint64_t size() const { return size_; }

  // Bytes [pos, pos + n) (fewer at the end of the file).
  std::string read_at(uint64_t pos, size_t n) {
    std::string out(n, '\0');
    if (::fseeko(file_, static_cast<off_t>(pos), SEEK_SET) != 0) {
      throw Error("cannot seek in input file " + path_ + ": " + std::strerror(errno));
    }
    const size_t got = std::fread(out.data(), 1, n, file_);
    if (got < n && std::ferror(file_)) {
      throw Error("error reading input file " + path_ + ": " + std::strerror(errno));
    }
    out.resize(got);
    return out;
  }

  // The first line start at or after pos: pos itself when a newline precedes it.
  uint64_t line_start_at_or_after(uint64_t pos) {
    if (pos == 0 || pos >= size_) return std::min(pos, size_);
    if (read_at(pos - 1, 1) == "\n") return pos;
    return after_next_newline(pos);
  }

  // One past the first '\n' at or after pos (the file's size when there is none).
  // Reads grow from 256 bytes to 64 KiB: lines are usually short, a long one is rare.
  uint64_t after_next_newline(uint64_t pos) {
    size_t n = 256;
    while (pos < size_) {
      const std::string chunk = read_at(pos, n);
      if (chunk.empty()) break;
      const auto nl = chunk.find('\n');
      if (nl != std::string::npos) return pos + nl + 1;
      pos += chunk.size();
      n = std::min<size_t>(2 * n, 64 << 10);
    }
    return size_;
  }

 private:
  std::string path_;
  uint64_t size_;
  std::FILE* file_ = nullptr;
};

// A separator line, as the text reader compares it: a trailing '\r' tolerated.
bool is_separator_line(std::string_view line, const std::string& separator) {
  if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line == separator;
}

// Whether the line that ends at `ls` (a line start > 0) is a separator line.
bool separator_line_ends_at(BoundaryScanner& scan, uint64_t ls, const std::string& separator) {
  // The separator, an optional '\r', the '\n', and the byte before the line.
  const uint64_t back = std::min<uint64_t>(ls, separator.size() + 3);
  const std::string tail = scan.read_at(ls - back, static_cast<size_t>(back));
  const auto nl = tail.find_last_of('\n', tail.size() >= 2 ? tail.size() - 2 : std::string::npos);
  std::string_view line(tail);
  if (nl != std::string::npos && tail.size() >= 2) {
    line.remove_prefix(nl + 1);
  } else if (ls - back != 0) {
    return false;  // the line is longer than a separator line can be
  }
  return is_separator_line(line, separator);
}

// An uncompressed file's bytes [begin, end).
class RangeSource : public ByteSource {
 public:
  RangeSource(const InputFile& file, uint64_t begin, uint64_t end, std::string label)
      : ByteSource(std::move(label)), left_(end - begin) {
    file_ = std::fopen(file.path.c_str(), "rb");
    if (!file_) throw Error("cannot open input file " + file.path + ": " + std::strerror(errno));
    if (::fseeko(file_, static_cast<off_t>(begin), SEEK_SET) != 0) {
      std::fclose(file_);
      throw Error("cannot seek in input file " + file.path + ": " + std::strerror(errno));
    }
  }
  ~RangeSource() override { std::fclose(file_); }
  size_t read(char* buf, size_t n) override {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(n, left_));
    if (want == 0) return 0;
    const size_t got = std::fread(buf, 1, want, file_);
    if (got < want && std::ferror(file_)) {
      throw Error("error reading input file " + path_ + ": " + std::strerror(errno));
    }
    left_ -= got;
    read_ += got;
    if (got < want) left_ = 0;  // the file shrank since it was listed
    return got;
  }
  uint64_t raw_bytes_read() const override { return read_; }
  size_t buffer_bytes() const override { return 0; }

 private:
  std::FILE* file_ = nullptr;
  uint64_t left_, read_ = 0;
};

}  // namespace

bool splits_into_blocks(const InputFile& file, const DocumentReaderOptions& options) {
  if (file.compression != Compression::kNone) return false;
  return file.format == InputFormat::kJsonl ||
         (file.format == InputFormat::kText && !options.doc_separator.empty());
}

namespace {

uint64_t document_start_at_or_after(BoundaryScanner& scan, const InputFile& file, uint64_t pos,
                                    const DocumentReaderOptions& options) {
  uint64_t ls = scan.line_start_at_or_after(pos);
  if (file.format == InputFormat::kJsonl || ls == 0 || ls >= scan.size()) return ls;
  // Text: a document starts after a separator line. The line ending at ls may be one (pos fell
  // inside it, or right after it); else the end of the next separator line.
  if (separator_line_ends_at(scan, ls, options.doc_separator)) return ls;
  while (ls < scan.size()) {
    const uint64_t next = scan.after_next_newline(ls);
    const size_t n =
        static_cast<size_t>(std::min<uint64_t>(next - ls, options.doc_separator.size() + 2));
    if (next - ls <= options.doc_separator.size() + 2 &&
        is_separator_line(scan.read_at(ls, n), options.doc_separator)) {
      return next;
    }
    ls = next;
  }
  return scan.size();
}

}  // namespace

uint64_t document_start_at_or_after(const InputFile& file, uint64_t pos,
                                    const DocumentReaderOptions& options) {
  BoundaryScanner scan(file);
  return document_start_at_or_after(scan, file, pos, options);
}

std::unique_ptr<DocumentReader> open_block_reader(const InputFile& file, uint64_t begin,
                                                  uint64_t end,
                                                  const DocumentReaderOptions& options) {
  if (!splits_into_blocks(file, options)) {
    throw Error("input file " + file.path + " (" + describe_format(file) +
                ") cannot be read in blocks");
  }
  BoundaryScanner scan(file);  // both ends found through one open file
  const uint64_t first = document_start_at_or_after(scan, file, begin, options);
  const uint64_t last = std::max(first, document_start_at_or_after(scan, file, end, options));
  return make_document_reader(
      std::make_unique<RangeSource>(file, first, last,
                                    file.path + " (block at byte " + std::to_string(begin) + ")"),
      file.format, options);
}

}  // namespace lmtrain::data
