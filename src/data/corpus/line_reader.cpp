#include "data/corpus/line_reader.h"

#include <algorithm>
#include <cstring>

namespace lmtrain::data {
namespace {

// The longest prefix of s[0, n) that does not end inside a UTF-8 sequence (at least 1 byte,
// so bytes that are not UTF-8 at all still make progress).
size_t utf8_safe_prefix(const char* s, size_t n) {
  size_t lead = n;  // where the last character starts
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    if ((static_cast<unsigned char>(s[n - back]) & 0xC0) != 0x80) {
      lead = n - back;
      break;
    }
  }
  if (lead == n) return n;  // no lead byte near the end: not UTF-8, cut anywhere
  const auto c = static_cast<unsigned char>(s[lead]);
  const size_t len = c < 0x80           ? 1
                     : (c >> 5) == 0x6  ? 2
                     : (c >> 4) == 0xE  ? 3
                     : (c >> 3) == 0x1E ? 4
                                        : 1;
  if (lead + len <= n || lead == 0) return n;
  return lead;
}

}  // namespace

LineReader::LineReader(ByteSource& source, size_t max_line_bytes, size_t read_bytes)
    : source_(source),
      max_line_bytes_(std::max<size_t>(max_line_bytes, 4)),
      read_bytes_(std::max<size_t>(read_bytes, 1)) {}

bool LineReader::fill() {
  if (eof_) return false;
  if (begin_ > 0) {  // keep the unread part at the front
    std::memmove(&buf_[0], buf_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (buf_.size() < end_ + read_bytes_) buf_.resize(end_ + read_bytes_);
  peak_ = std::max(peak_, buf_.size());
  const size_t got = source_.read(&buf_[end_], read_bytes_);
  if (got == 0) {
    eof_ = true;
    return false;
  }
  end_ += got;
  return true;
}

bool LineReader::next(std::string_view* line, bool* complete) {
  for (;;) {
    const size_t avail = end_ - begin_;
    const char* start = buf_.data() + begin_;
    const size_t limit = std::min(avail, max_line_bytes_);
    const void* nl =
        scanned_ < limit ? std::memchr(start + scanned_, '\n', limit - scanned_) : nullptr;
    size_t take = 0;
    if (nl) {
      take = static_cast<const char*>(nl) - start + 1;
      *complete = true;
    } else if (avail >= max_line_bytes_) {
      take = utf8_safe_prefix(start, max_line_bytes_);
      *complete = false;
    } else if (!eof_) {
      scanned_ = avail;
      fill();  // may move the buffer: look again
      continue;
    } else {
      if (avail == 0) return false;
      take = avail;  // the last line, without '\n'
      *complete = true;
    }
    if (!continuing_) ++line_number_;
    whole_ = !continuing_ && *complete;
    continuing_ = !*complete;
    *line = std::string_view(start, take);
    begin_ += take;
    scanned_ = 0;
    return true;
  }
}

}  // namespace lmtrain::data
