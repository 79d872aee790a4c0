// The stages of `lmtrain prepare` (data/prepare.h), which run_prepare (data/prepare.cpp) runs in
// order, each in a file of its own:
//   prepare_options.cpp    the options checked; what the stages take of them
//   prepare_resume.cpp     the staging dir's journal: a killed run's finished work reused or not
//   prepare_hash.cpp       stage 1: every input's sha256; binary text files skipped
//   prepare_sample.cpp     stage 2's pass over the corpus: the tokenizer's sample and the split
//   prepare_tokenizer.cpp  stage 2: the tokenizer trained (or the one given copied), journaled
//   prepare_encode.cpp     stage 3: the corpus encoded into pieces, on all threads
//   prepare_summary.cpp    stage 4: the counts of the output and its prepare.json
// Internal to data/: declared here, not in prepare.h, so that prepare's API stays run_prepare
// and its options; the namespace keeps these names off data's own.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/output_dir.h"
#include "data/bpe_tokenizer.h"
#include "data/corpus/document_reader.h"
#include "data/corpus/input_files.h"
#include "data/position_split.h"
#include "data/prepare.h"
#include "data/prepare_journal.h"

namespace lmtrain::data::prepare_detail {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// ---- the options (prepare_options.cpp)

// Throws UsageError for an option no stage could run with, before any file is touched.
void validate(const PrepareOptions& opt);
// The threads of the hashing and encoding passes (num_threads, or all cores).
int thread_count(const PrepareOptions& opt);
// How every pass over the corpus reads its documents.
DocumentReaderOptions reader_options(const PrepareOptions& opt);

// ---- the staging dir (prepare_resume.cpp)

// The journal in `out`'s staging dir when it is a killed prepare's of these inputs and options
// (its finished work is then reused); otherwise (none, another run's, or an input edited in
// place) the staging dir is cleared and the journal started afresh. When the inputs had to be
// hashed to trust the journal, `rehashed` holds that record, for stage 1 to use as its own.
PrepareJournal open_journal(const std::vector<InputFile>& all_files, const PrepareOptions& opt,
                            core::OutputDir& out, std::optional<nlohmann::json>& rehashed);

// Removes what a killed run left in the staging dir that its journal does not vouch for: shard
// temporaries and pieces after the last journaled one.
void remove_unjournaled(const std::string& stage, size_t pieces);

// ---- stage 1: every input's sha256, and which text files are binary (skipped)
// (prepare_hash.cpp)

// Every input's sha256, and which text files are binary: the journal's {"hashes", "skipped"}.
nlohmann::json hash_inputs(const std::vector<InputFile>& files, const PrepareOptions& opt);

// The inputs the later stages read: all but those stage 1's record (`hashes_record`) skips,
// which it warns of and lists in `skipped_files`; `skipped` marks them by index for prepare.json.
std::vector<InputFile> text_files(const std::vector<InputFile>& all_files,
                                  nlohmann::json& hashes_record, std::vector<bool>* skipped,
                                  std::vector<std::string>* skipped_files);

// ---- stage 2: the tokenizer (prepare_sample.cpp, prepare_tokenizer.cpp)

// What the sampling pass counts; the tokenizer stage journals and logs the sample's size.
struct SampleStats {
  uint64_t documents = 0, bytes = 0;
  // Documents as read (a long text document in pieces), those with validation text, and the
  // documents themselves (pieces joined).
  uint64_t corpus_documents = 0, corpus_val_documents = 0, whole_documents = 0;
  PiecedDocumentSizes pieced;  // the sizes of the documents read in pieces
};

// One pass over the corpus, two when the content-hash split fails: the tokenizer's training
// sample (into `sample`; none with a given tokenizer) and the `stats` of the split it was drawn
// under, which check_counts has passed. True when that split is by position.
bool sample_and_split(const std::vector<InputFile>& files, const PrepareOptions& opt,
                      std::vector<std::string>* sample, SampleStats* stats,
                      size_t* peak_reader_bytes);

// `documents` of the corpus; the parts of them that went to training and to validation.
// Throws UsageError when a split would be empty.
void check_counts(uint64_t documents, uint64_t train_parts, uint64_t val_parts, bool by_position,
                  const PrepareOptions& opt);

// Writes the tokenizer to `path` (trained on a sample of `files`, or the given one) and returns
// the journal's {"tokenizer"} record of it. `t0`: when stage 2 began (its time is logged).
nlohmann::json make_tokenizer(const std::vector<InputFile>& files, const PrepareOptions& opt,
                              const std::string& path, Clock::time_point t0,
                              size_t* peak_reader_bytes);

// The tokenizer at `path`, checked against the journal's `record` of it (a mismatch names
// `stage` to remove).
BpeTokenizer load_journaled_tokenizer(const std::string& path, nlohmann::json& record,
                                      const std::string& stage);

// The sizes of the documents read in pieces, as the journal's tokenizer `record` keeps them.
PiecedDocumentSizes journaled_pieced_documents(const nlohmann::json& record);

// ---- stage 3: encoding (prepare_encode.cpp)

// Encodes the corpus from after the last of `records` (all of it when there are none) into
// pieces in `stage`, appending each finished piece to `records` and to the journal. By position
// when `by_position` (the sizes of the documents read in pieces), else by content hash.
void encode_corpus(const std::vector<InputFile>& files, const PrepareOptions& opt,
                   const PiecedDocumentSizes* by_position, const BpeTokenizer& tok,
                   const std::string& stage, PrepareJournal& journal,
                   std::vector<PieceRecord>& records, size_t* peak_reader_bytes);

// ---- stage 4: the counts and prepare.json (prepare_summary.cpp)

// Fills `res`'s counts from the encoding's `totals` and logs them.
void count_output(const PieceRecord& totals, size_t num_files, size_t num_pieces,
                  const BpeTokenizer& tok, PrepareResult& res);

// Writes STAGING/prepare.json: every input (`skipped` marks those stage 1 skipped; `state`
// holds the journal's records of stages 1 and 2), the options that shaped the output, and its
// counts (`res`, `totals`, the pieces' `records`).
void write_summary(const std::string& stage, const PrepareOptions& opt,
                   const std::vector<InputFile>& all_files, const std::vector<bool>& skipped,
                   JournalState& state, const std::vector<PieceRecord>& records,
                   const PieceRecord& totals, const BpeTokenizer& tok, bool by_position,
                   const PrepareResult& res);

}  // namespace lmtrain::data::prepare_detail
