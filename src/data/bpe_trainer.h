// Trains a byte-level BPE vocabulary (GPT-2 style) from documents.
//
// Vocabulary layout of the result: ids 0..255 are the single bytes (id == byte value), then
// one token per learned merge, then the special token <|endoftext|> as the last id.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/bpe_tokenizer.h"
#include "data/pretokenizer.h"

namespace lmtrain::core {
class Progress;
}

namespace lmtrain::data {

struct BpeTrainerOptions {
  size_t vocab_size = 4096;  // total: 256 bytes + merges + 1 special; must be >= 257
  std::string pattern = kGpt2Pattern;
  uint64_t min_pair_count = 1;  // stop early once the best pair is rarer than this
};

class BpeTrainer {
 public:
  explicit BpeTrainer(BpeTrainerOptions options);

  // train() tells `progress` the merges made so far after each one (nullptr: nobody).
  void set_progress(core::Progress* progress) { progress_ = progress; }

  // Counts the pre-tokens of one document. Merges never cross documents or pre-tokens.
  void add_document(std::string_view text);

  // Runs the merge loop. Ties between equally frequent pairs go to the pair whose (left bytes,
  // right bytes) is lexicographically smallest, so the result depends only on the word counts.
  // If the corpus runs out of pairs first, the vocabulary is smaller than requested (warning).
  BpeTokenizer train();

  // For a word counted by add_document: its segmentation at the end of training (empty if the
  // word was never seen). encode() of that word must give the same ids.
  std::vector<uint32_t> segmentation(std::string_view word) const;

  size_t num_unique_words() const { return word_counts_.size(); }
  uint64_t num_words() const { return total_words_; }

 private:
  BpeTrainerOptions options_;
  Pretokenizer pretok_;
  std::unordered_map<std::string, uint64_t> word_counts_;
  uint64_t total_words_ = 0;
  // Filled by train(): word -> index into words_ (its final symbols).
  std::unordered_map<std::string, uint32_t> word_index_;
  std::vector<std::vector<uint32_t>> words_;
  core::Progress* progress_ = nullptr;
};

// Convenience: trains on `docs` in one call.
BpeTokenizer train_bpe(const std::vector<std::string>& docs, size_t vocab_size);

}  // namespace lmtrain::data
