#include "data/corpus/corpus_reader.h"

#include <algorithm>

#include "core/error.h"

namespace lmtrain::data {

CorpusReader::CorpusReader(std::vector<InputFile> files, DocumentReaderOptions options,
                           CorpusPosition start)
    : files_(std::move(files)), options_(std::move(options)), pos_{start.file, 0} {
  for (const InputFile& f : files_) {
    bytes_before_.push_back(total_bytes_);
    total_bytes_ += f.size;
  }
  if (start.file > files_.size() || (start.file == files_.size() && start.document > 0)) {
    throw Error("corpus position (file " + std::to_string(start.file) + ", document " +
                std::to_string(start.document) + ") is past the " + std::to_string(files_.size()) +
                " input files");
  }
  if (start.document == 0) return;
  open_current();
  std::string skipped;
  while (pos_.document < start.document) {
    if (!read_piece(&skipped)) {
      throw Error("input file " + files_[pos_.file].path + " has " + std::to_string(pos_.document) +
                  " documents, fewer than the " + std::to_string(start.document) +
                  " an earlier run read from it (did it change?)");
    }
  }
}

void CorpusReader::open_current() {
  reader_ = open_document_reader(files_[pos_.file], options_);
  next_offset_ = 0;
}

bool CorpusReader::read_piece(std::string* text) {
  if (!reader_->next(text)) return false;
  if (next_offset_ == 0) piece_.first = pos_;
  piece_.offset = next_offset_;
  piece_.continues = reader_->continues();
  next_offset_ = piece_.continues ? next_offset_ + text->size() : 0;
  ++pos_.document;
  return true;
}

bool CorpusReader::next_in_file(std::string* text) {
  if (at_end()) return false;
  if (!reader_) open_current();
  if (read_piece(text)) return true;
  peak_ = std::max(peak_, reader_->peak_buffer_bytes());
  reader_.reset();
  pos_ = {pos_.file + 1, 0};
  return false;
}

uint64_t CorpusReader::bytes_done() const {
  if (at_end()) return total_bytes_;
  const uint64_t current = reader_ ? reader_->bytes_consumed() : 0;
  return bytes_before_[pos_.file] + std::min<uint64_t>(current, files_[pos_.file].size);
}

size_t CorpusReader::peak_buffer_bytes() const {
  return std::max(peak_, reader_ ? reader_->peak_buffer_bytes() : size_t{0});
}

bool next_chunk(CorpusReader& reader, uint64_t target_bytes, DocumentChunk* chunk) {
  chunk->documents.clear();
  chunk->pieces.clear();
  chunk->bytes = 0;
  std::string text;
  while (!reader.at_end()) {
    chunk->start = reader.position();
    while (chunk->bytes < target_bytes && reader.next_in_file(&text)) {
      chunk->bytes += text.size();
      chunk->documents.push_back(std::move(text));
      chunk->pieces.push_back(reader.piece());
      text = std::string();
    }
    if (!chunk->documents.empty()) {
      chunk->end = reader.position();
      return true;
    }
  }
  return false;
}

}  // namespace lmtrain::data
