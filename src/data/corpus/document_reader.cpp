#include "data/corpus/document_reader.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/json_strict.h"
#include "core/log.h"
#include "data/corpus/line_reader.h"
#include "data/corpus/parquet_file.h"

namespace lmtrain::data {
namespace {

std::string_view without_newline(std::string_view line) {
  if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

// Text: the whole file is one document, or lines equal to the separator split it. Documents
// longer than max_document_bytes are cut at a line boundary (a line longer than that, at a
// UTF-8 character boundary).
class TextDocuments : public DocumentReader {
 public:
  TextDocuments(std::unique_ptr<ByteSource> source, const DocumentReaderOptions& options)
      : source_(std::move(source)),
        options_(options),
        lines_(*source_, options.max_document_bytes, options.read_buffer_bytes) {}

  bool next(std::string* text) override {
    for (;;) {
      text->clear();
      if (have_pending_) {
        text->swap(pending_);
        have_pending_ = false;
      } else if (eof_) {
        return false;
      }
      bool at_end = true;
      continues_ = false;
      std::string_view line;
      bool complete = true;
      while (lines_.next(&line, &complete)) {
        if (!options_.doc_separator.empty() && lines_.whole() &&
            without_newline(line) == options_.doc_separator) {
          at_end = false;  // the separator line itself belongs to no document
          break;
        }
        if (text->size() + line.size() > options_.max_document_bytes) {
          warn_cut();
          pending_.assign(line);  // starts the next piece of this document
          have_pending_ = true;
          continues_ = true;
          at_end = false;
          break;
        }
        text->append(line);
      }
      if (at_end) eof_ = true;
      line_ = lines_.line_number();
      // Blank text after the last separator ends the file; it is no document of its own.
      const bool keep = options_.keep_blank && !(at_end && documents_ > 0 && is_blank(*text));
      if (keep || !is_blank(*text)) {
        ++documents_;
        return true;
      }
    }
  }
  std::string where() const override { return source_->path() + ":" + std::to_string(line_); }
  uint64_t bytes_consumed() const override { return source_->raw_bytes_read(); }
  size_t peak_buffer_bytes() const override {
    return source_->buffer_bytes() + lines_.peak_buffer_bytes();
  }

 private:
  void warn_cut() {
    if (warned_) return;
    warned_ = true;
    log::warn(
        log::format("%s: a document longer than %zu bytes is cut into pieces at line "
                    "boundaries (line %llu)",
                    source_->path().c_str(), options_.max_document_bytes,
                    static_cast<unsigned long long>(lines_.line_number())));
  }

  std::unique_ptr<ByteSource> source_;
  DocumentReaderOptions options_;
  LineReader lines_;
  std::string pending_;
  bool have_pending_ = false;
  bool eof_ = false;
  bool warned_ = false;
  uint64_t line_ = 0;
};

// JSONL: one JSON object per line, its text field a string (null: no document).
class JsonlDocuments : public DocumentReader {
 public:
  JsonlDocuments(std::unique_ptr<ByteSource> source, const DocumentReaderOptions& options)
      : source_(std::move(source)),
        options_(options),
        lines_(*source_, options.max_document_bytes, options.read_buffer_bytes) {}

  bool next(std::string* text) override {
    std::string_view line;
    bool complete = true;
    while (lines_.next(&line, &complete)) {
      const std::string at = where_line();
      if (!complete) {
        throw Error(at + ": a JSON line longer than " +
                    std::to_string(options_.max_document_bytes) +
                    " bytes (the longest document read)");
      }
      if (is_blank(line)) continue;
      const auto j = core::parse_json_strict(line, at);
      const std::string& key = options_.text_column;
      if (!j.is_object())
        throw Error(at + ": expected a JSON object with a \"" + key + "\" string");
      const auto it = j.find(key);
      if (it == j.end()) {
        throw Error(at + ": the object has no \"" + key + "\" field (name the text field with " +
                    options_.text_column_setting + ")");
      }
      if (it->is_null()) {
        if (!options_.keep_blank) continue;
        text->clear();
        ++documents_;
        return true;
      }
      if (!it->is_string()) {
        throw Error(at + ": field \"" + key + "\" is a " + it->type_name() + ", not a string");
      }
      const auto& s = it->get_ref<const std::string&>();
      if (is_blank(s) && !options_.keep_blank) continue;
      text->assign(s);
      ++documents_;
      return true;
    }
    return false;
  }
  std::string where() const override { return where_line(); }
  uint64_t bytes_consumed() const override { return source_->raw_bytes_read(); }
  size_t peak_buffer_bytes() const override {
    return source_->buffer_bytes() + lines_.peak_buffer_bytes();
  }

 private:
  std::string where_line() const {
    return source_->path() + ":" + std::to_string(lines_.line_number());
  }
  std::unique_ptr<ByteSource> source_;
  DocumentReaderOptions options_;
  LineReader lines_;
};

// Parquet: the rows of the text column, one row group in memory at a time.
class ParquetDocuments : public DocumentReader {
 public:
  ParquetDocuments(const InputFile& file, const DocumentReaderOptions& options)
      : file_(file.path, options.text_column, options.text_column_setting),
        keep_blank_(options.keep_blank) {}

  bool next(std::string* text) override {
    for (;;) {
      if (row_ >= rows_) {
        if (group_ + 1 >= file_.num_row_groups()) return false;
        if (group_ >= 0) done_bytes_ += file_.row_group_compressed_bytes(group_);
        ++group_;
        file_.load_row_group(group_);
        rows_ = file_.loaded_rows();
        row_ = 0;
        continue;
      }
      const auto v = file_.value(row_++);
      if ((!v || is_blank(*v)) && !keep_blank_) continue;
      text->assign(v ? v->data() : "", v ? v->size() : 0);
      ++documents_;
      return true;
    }
  }
  std::string where() const override {
    return file_.path() + " row group " + std::to_string(group_) + " row " +
           std::to_string(row_ - 1);
  }
  uint64_t bytes_consumed() const override {
    return done_bytes_ + (group_ >= 0 ? file_.row_group_compressed_bytes(group_) : 0);
  }
  size_t peak_buffer_bytes() const override {
    return static_cast<size_t>(file_.peak_arrow_bytes());
  }

 private:
  ParquetFile file_;
  bool keep_blank_;
  int group_ = -1;
  int64_t row_ = 0, rows_ = 0;
  uint64_t done_bytes_ = 0;
};

}  // namespace

bool is_blank(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c); });
}

std::unique_ptr<DocumentReader> make_document_reader(std::unique_ptr<ByteSource> source,
                                                     InputFormat format,
                                                     const DocumentReaderOptions& options) {
  if (format == InputFormat::kJsonl) {
    return std::make_unique<JsonlDocuments>(std::move(source), options);
  }
  if (format == InputFormat::kParquet) {
    throw Error("parquet input " + source->path() + " is read from a file, not a byte stream");
  }
  return std::make_unique<TextDocuments>(std::move(source), options);
}

std::unique_ptr<DocumentReader> open_document_reader(const InputFile& file,
                                                     const DocumentReaderOptions& options) {
  if (file.format == InputFormat::kParquet) {
    return std::make_unique<ParquetDocuments>(file, options);
  }
  return make_document_reader(
      open_byte_source(file.path, file.compression, options.read_buffer_bytes), file.format,
      options);
}

bool is_binary_text_file(const InputFile& file) {
  if (file.format != InputFormat::kText) return false;
  auto source = open_byte_source(file.path, file.compression, 64 << 10);
  char buf[8192];
  size_t got = 0;
  while (got < sizeof(buf)) {
    const size_t n = source->read(buf + got, sizeof(buf) - got);
    if (n == 0) break;
    got += n;
  }
  return std::memchr(buf, '\0', got) != nullptr;
}

}  // namespace lmtrain::data
