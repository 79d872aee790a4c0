// Documents of one input file, streamed: text files (whole, or split at --doc_separator lines),
// JSONL (a text field per line) and parquet (a text column, a row group at a time), .gz / .zst
// compressed text and JSONL decompressed on the way. Memory is bounded whatever the file's
// size: one read buffer and one document (at most max_document_bytes), or one row group.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "data/corpus/byte_source.h"
#include "data/corpus/input_files.h"

namespace lmtrain::data {

struct DocumentReaderOptions {
  std::string text_column = "text";  // the JSONL field / parquet column holding the text
  // How the user sets text_column, for the message when a line or file lacks it: the flag of
  // prepare and tokenize, or the config key of a stream (data.stream.text_column).
  std::string text_column_setting = "--text_column NAME";
  // Text files: a line equal to this (a trailing '\r' tolerated) separates documents; empty:
  // each file is one document.
  std::string doc_separator;
  // A longer text document is cut at a line boundary into several (with a warning); a longer
  // JSONL line is an error. Bounds the memory a reader holds.
  size_t max_document_bytes = size_t{64} << 20;
  size_t read_buffer_bytes = kDefaultReadBufferBytes;
  // Return blank documents too (an empty or null JSONL text, a blank parquet row, an empty
  // text between two separators, an empty file), so that document N of the output is record N
  // of the input (`tokenize --documents`). Blank lines of a JSONL file and what follows the
  // last separator of a text file are still no document.
  bool keep_blank = false;
};

class DocumentReader {
 public:
  virtual ~DocumentReader() = default;
  // The next document that is not blank (all whitespace; see keep_blank) into *text; false at the
  // end of the file. Throws lmtrain::Error (bad data, invalid JSON included) naming the file and
  // where in it: the line, or the row group.
  virtual bool next(std::string* text) = 0;
  // Where the last document came from: "FILE:LINE", "FILE row group G row R".
  virtual std::string where() const = 0;
  // Bytes of the file on disk consumed so far: progress.
  virtual uint64_t bytes_consumed() const = 0;
  // The most bytes the reader held at once in buffers of its own (read buffer and pending
  // line; for parquet, Arrow's allocations for the loaded row group): the memory bound.
  virtual size_t peak_buffer_bytes() const = 0;
  // Documents returned so far.
  uint64_t documents() const { return documents_; }
  // True when the document last returned is a piece of a longer one, cut at
  // max_document_bytes: the next document goes on with its text.
  bool continues() const { return continues_; }

 protected:
  uint64_t documents_ = 0;
  bool continues_ = false;
};

std::unique_ptr<DocumentReader> open_document_reader(const InputFile& file,
                                                     const DocumentReaderOptions& options);

// A text or JSONL reader over any byte source (the fuzz targets read from memory).
std::unique_ptr<DocumentReader> make_document_reader(std::unique_ptr<ByteSource> source,
                                                     InputFormat format,
                                                     const DocumentReaderOptions& options);

// A text file (not JSONL or parquet) whose first 8 KB, decompressed, hold a NUL byte: a binary
// file inside a directory of text (fortune's *.dat index files), which prepare skips.
bool is_binary_text_file(const InputFile& file);

// True when s is empty or only whitespace.
bool is_blank(std::string_view s);

}  // namespace lmtrain::data
