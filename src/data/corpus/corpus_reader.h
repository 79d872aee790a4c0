// The documents of a list of input files, in order, with a position that names where the next
// one comes from (file index, documents already read from that file): what a resumed prepare
// starts from. One file is open at a time.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/corpus/document_reader.h"
#include "data/corpus/input_files.h"

namespace lmtrain::data {

struct CorpusPosition {
  uint64_t file = 0;      // index into the file list
  uint64_t document = 0;  // documents of that file before this position
  bool operator==(const CorpusPosition& o) const {
    return file == o.file && document == o.document;
  }
  bool operator<(const CorpusPosition& o) const {
    return file != o.file ? file < o.file : document < o.document;
  }
};

// Where a document read stands in the document it was cut from (a text document longer than
// max_document_bytes is read in pieces); a document read whole is its own first piece.
struct PieceOfDocument {
  CorpusPosition first;  // of the document's first piece
  uint64_t offset = 0;   // bytes of the document before this piece
  bool continues = false;
  bool whole() const { return offset == 0 && !continues; }
};

class CorpusReader {
 public:
  // Starts at `start`: skips the files before it unread, and reads (and drops) the documents of
  // its file before it.
  CorpusReader(std::vector<InputFile> files, DocumentReaderOptions options,
               CorpusPosition start = {});

  // The next document of the current file into *text. False at that file's end, and the
  // position moves to the next file's start (call again to read it).
  bool next_in_file(std::string* text);
  // The document last read, when it is a piece of a longer one (DocumentReader::continues):
  // the bytes of that document before it, whether more of it follows, and the position of its
  // first piece (which names the whole document).
  PieceOfDocument piece() const { return piece_; }
  bool at_end() const { return pos_.file >= files_.size(); }
  CorpusPosition position() const { return pos_; }
  // Input bytes (on disk) done: the files before the current one, and what the current one
  // has consumed.
  uint64_t bytes_done() const;
  uint64_t bytes_total() const { return total_bytes_; }
  // Where the last document came from ("FILE:LINE", "FILE row group G row R").
  std::string where() const { return reader_ ? reader_->where() : std::string(); }
  // The most any one file's reader held in buffers (DocumentReader::peak_buffer_bytes).
  size_t peak_buffer_bytes() const;
  const std::vector<InputFile>& files() const { return files_; }

 private:
  void open_current();

  std::vector<InputFile> files_;
  DocumentReaderOptions options_;
  CorpusPosition pos_;
  bool read_piece(std::string* text);  // one document of the open file, tracking piece_

  std::unique_ptr<DocumentReader> reader_;  // of files_[pos_.file], opened lazily
  PieceOfDocument piece_;
  uint64_t next_offset_ = 0;            // of the next piece, when the last one continues
  std::vector<uint64_t> bytes_before_;  // input bytes of the files before each file
  uint64_t total_bytes_ = 0;
  size_t peak_ = 0;
};

// Consecutive documents of one file, about `target_bytes` of text (at least one document):
// the unit prepare encodes on a thread. Chunks depend only on the corpus and target_bytes.
struct DocumentChunk {
  CorpusPosition start, end;  // end: the position after its last document
  std::vector<std::string> documents;
  std::vector<PieceOfDocument> pieces;  // of each document
  uint64_t bytes = 0;
};

// The next chunk from `reader`; false when the corpus is exhausted.
bool next_chunk(CorpusReader& reader, uint64_t target_bytes, DocumentChunk* chunk);

}  // namespace lmtrain::data
