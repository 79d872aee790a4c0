// The journal of an out-of-core `lmtrain prepare`: STAGING/prepare.journal, JSON lines
// appended (and fsynced) as each stage finishes, so a killed prepare resumes where it stopped.
//   line 1    {"journal": 1, "fingerprint": {...}}   inputs (path, size, mtime) and options
//   then      {"hashes": [...], "skipped": [...]}   every input's sha256; binary files skipped
//             {"tokenizer": {...}}                  tokenizer.json is in the staging dir
//             {"piece": k, "next": [file, doc], ...} pieces 0..k are complete, the corpus
//                                                   goes on at `next`; running totals
// A run with another fingerprint (changed inputs or options) starts over. A torn last line
// (killed while writing it) is ignored.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "data/corpus/corpus_reader.h"

namespace lmtrain::data {

struct PieceRecord {
  uint64_t index = 0;
  CorpusPosition next;  // where the corpus goes on after this piece
  // Running totals after this piece.
  uint64_t train_tokens = 0, val_tokens = 0;
  uint64_t documents = 0;  // of the corpus; by position each has a train and a val part
  uint64_t train_documents = 0, val_documents = 0;
  uint64_t train_bytes = 0, val_bytes = 0;
  // This piece alone.
  uint64_t piece_train_tokens = 0, piece_val_tokens = 0;

  nlohmann::json to_json() const;
  static PieceRecord from_json(const nlohmann::json& j);
};

struct JournalState {
  std::optional<nlohmann::json> hashes;     // the {"hashes", "skipped"} record
  std::optional<nlohmann::json> tokenizer;  // the {"tokenizer"} record's value
  std::vector<PieceRecord> pieces;
};

class PrepareJournal {
 public:
  static constexpr const char* kFileName = "prepare.journal";

  // Opens STAGING/prepare.journal. When it holds `fingerprint`, state() is what it records;
  // otherwise (none, or another one) it is started afresh with that fingerprint and
  // `matched` is false.
  PrepareJournal(const std::string& staging_dir, const nlohmann::json& fingerprint);
  bool matched() const { return matched_; }
  // What the journal already records (the earlier run's finished stages).
  const JournalState& state() const { return state_; }
  // A fingerprint that differs: which top-level keys of it changed (for the log).
  const std::string& difference() const { return difference_; }

  // Appends one record and makes it durable (fsync).
  void append(const nlohmann::json& record);
  void remove();  // once the output is complete
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool matched_ = false;
  std::string difference_;
  JournalState state_;
};

}  // namespace lmtrain::data
