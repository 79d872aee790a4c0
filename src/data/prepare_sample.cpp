// Stage 2's pass over the corpus for `lmtrain prepare`: the sample the tokenizer trains on,
// drawn from the training documents only, and the train/val split it was drawn under (by
// content hash, or by position when the corpus has too few documents for that).
#include <algorithm>
#include <queue>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/log.h"
#include "data/corpus/corpus_reader.h"
#include "data/document_hash.h"
#include "data/prepare_stages.h"

namespace lmtrain::data::prepare_detail {
namespace {

// The training documents with the smallest sample keys that fit in `budget` bytes, read in one
// pass with at most `budget` bytes of them held; and how many documents go to validation. By
// position (`by_position`: the sizes of the documents read in pieces), every document's
// training part is a candidate; else the content hash decides. A budget of 0 only counts.
std::vector<std::string> sample_for_tokenizer(const std::vector<InputFile>& files,
                                              const PrepareOptions& opt,
                                              const PiecedDocumentSizes* by_position,
                                              const char* phase, SampleStats* stats,
                                              size_t* peak_reader_bytes) {
  struct Candidate {
    uint64_t key, seq;
    std::string text;
    bool operator<(const Candidate& o) const { return key != o.key ? key < o.key : seq < o.seq; }
  };
  std::priority_queue<Candidate> heap;  // the largest key on top: the first to drop
  uint64_t held = 0, seq = 0;
  const uint64_t budget = opt.tokenizer_train_bytes;
  CorpusReader reader(files, reader_options(opt));
  ProgressMeter meter(opt.progress, phase, reader.bytes_total(), opt.progress_seconds);
  std::string text;
  while (!reader.at_end()) {
    if (!reader.next_in_file(&text)) continue;
    ++stats->corpus_documents;
    const PieceOfDocument piece = reader.piece();
    if (!piece.continues) ++stats->whole_documents;
    if (!piece.whole()) stats->pieced[piece.first] = piece.offset + text.size();
    const uint64_t h = document_hash(text);
    if (by_position) {
      const size_t cut = position_split_cut(text, piece, *by_position, opt.val_fraction);
      if (cut < text.size()) ++stats->corpus_val_documents;
      text.resize(cut);
    }
    if (!by_position && is_val_document(h, opt.seed, opt.val_fraction)) {
      ++stats->corpus_val_documents;
    } else if (text.size() <= budget) {
      const uint64_t key = sample_key(h, opt.seed);
      const Candidate probe{key, seq, {}};
      // Once full, a document whose key is above every held one would be the first dropped.
      if (!(held + text.size() > budget && !heap.empty() && heap.top() < probe)) {
        held += text.size();
        heap.push(Candidate{key, seq, std::move(text)});
        text = std::string();
        while (held > budget) {
          held -= heap.top().text.size();
          heap.pop();
        }
      }
    }
    ++seq;
    meter.update(reader.bytes_done(), stats->corpus_documents);
  }
  meter.finish(reader.bytes_total(), stats->corpus_documents);
  *peak_reader_bytes = std::max(*peak_reader_bytes, reader.peak_buffer_bytes());
  std::vector<std::string> docs;
  while (!heap.empty()) {
    docs.push_back(std::move(const_cast<Candidate&>(heap.top()).text));
    heap.pop();
  }
  stats->documents = docs.size();
  stats->bytes = held;
  return docs;
}

// The content-hash split needs a document on each side; fewer documents than that (one book,
// a few files) are split by position within each document instead. One document read in pieces
// is still one document.
bool hash_split_works(const SampleStats& s) {
  return s.whole_documents >= 2 && s.corpus_val_documents > 0 &&
         s.corpus_val_documents < s.corpus_documents;
}

// The options of the pass that samples the tokenizer's training text; with a given tokenizer
// nothing is sampled (budget 0), the pass only counts the split.
PrepareOptions counting_or_sampling(const PrepareOptions& opt) {
  PrepareOptions o = opt;
  if (!opt.tokenizer.empty()) o.tokenizer_train_bytes = 0;
  return o;
}

}  // namespace

// `documents` of the corpus; the parts of them that went to training and to validation.
void check_counts(uint64_t documents, uint64_t train_parts, uint64_t val_parts, bool by_position,
                  const PrepareOptions& opt) {
  if (documents == 0) throw UsageError("prepare: the inputs hold no non-empty document");
  if (by_position) {
    if (val_parts == 0) {
      throw UsageError(log::format(
          "prepare: %llu documents are too few for the content-hash split, and none has a line "
          "boundary to cut its last %g of bytes off at for validation: give more documents, or "
          "text with line breaks",
          static_cast<unsigned long long>(documents), opt.val_fraction));
    }
    return;
  }
  if (documents < 2) {
    throw UsageError("prepare: need at least 2 non-empty documents (train and val), found " +
                     std::to_string(documents));
  }
  if (val_parts == 0 || train_parts == 0) {
    throw UsageError(log::format(
        "prepare: no document fell into the %s split (%llu documents, val_fraction %g; the "
        "split goes by each document's hash): %s --val_fraction, or give more documents",
        val_parts == 0 ? "validation" : "training", static_cast<unsigned long long>(documents),
        opt.val_fraction, val_parts == 0 ? "raise" : "lower"));
  }
}

bool sample_and_split(const std::vector<InputFile>& files, const PrepareOptions& opt,
                      std::vector<std::string>* sample, SampleStats* stats,
                      size_t* peak_reader_bytes) {
  // Sampling also counts the documents the content-hash split puts in validation; when
  // either side would be empty, the split goes by position instead (and a trained
  // tokenizer's sample is then drawn again, from the training parts).
  const char* phase = opt.tokenizer.empty() ? "sample" : "count";
  *sample = sample_for_tokenizer(files, counting_or_sampling(opt), nullptr, phase, stats,
                                 peak_reader_bytes);
  const bool by_position = !hash_split_works(*stats);
  if (by_position && stats->whole_documents > 0) {
    log::info(log::format(
        "prepare: too few documents for the content-hash split (%llu, of which it puts %llu "
        "in validation at val_fraction %g): splitting by position instead, the last %g of "
        "each document's bytes, cut at a line boundary, goes to validation",
        static_cast<unsigned long long>(stats->whole_documents),
        static_cast<unsigned long long>(stats->corpus_val_documents), opt.val_fraction,
        opt.val_fraction));
    const PiecedDocumentSizes pieced = std::move(stats->pieced);
    *stats = SampleStats{};
    *sample = sample_for_tokenizer(files, counting_or_sampling(opt), &pieced, phase, stats,
                                   peak_reader_bytes);
  }
  check_counts(stats->whole_documents, stats->corpus_documents - stats->corpus_val_documents,
               stats->corpus_val_documents, by_position, opt);
  return by_position;
}

}  // namespace lmtrain::data::prepare_detail
