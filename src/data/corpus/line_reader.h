// Lines of a ByteSource, in a buffer of bounded size: a line longer than `max_line_bytes` comes
// back in pieces (complete = false for all but the last), so no input makes it grow further.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "data/corpus/byte_source.h"

namespace lmtrain::data {

class LineReader {
 public:
  LineReader(ByteSource& source, size_t max_line_bytes,
             size_t read_bytes = kDefaultReadBufferBytes);

  // The next line, with its '\n' when it has one (the last line of a file may not), into
  // *line (valid until the next call). A piece of a longer line ends at a UTF-8 character
  // boundary and has *complete = false. False at the end of the input.
  bool next(std::string_view* line, bool* complete);
  // 1-based number of the line the last piece returned belongs to.
  uint64_t line_number() const { return line_number_; }
  // The last piece returned is a whole line (not the start, middle or end of a longer one).
  bool whole() const { return whole_; }
  // The largest the buffer has been: at most max_line_bytes + read_bytes.
  size_t peak_buffer_bytes() const { return peak_; }

 private:
  bool fill();  // reads more; false at the end of the input

  ByteSource& source_;
  size_t max_line_bytes_, read_bytes_;
  std::string buf_;
  size_t begin_ = 0, end_ = 0;  // unread bytes: buf_[begin_, end_)
  size_t scanned_ = 0;          // bytes from begin_ already searched for '\n'
  bool eof_ = false;
  bool continuing_ = false;  // the previous piece was an incomplete line
  bool whole_ = true;
  uint64_t line_number_ = 0;
  size_t peak_ = 0;
};

}  // namespace lmtrain::data
