// Training data of SFT (data.format: chat): the conversations `lmtrain prepare --chat` wrote
// (data/chat/chat_prepare.h: train.bin + train_mask.bin, val.bin + val_mask.bin), one
// conversation per row, padded by bucket.
//
// A row is a conversation's first T + 1 tokens (a longer one is cut, as nanochat's
// render_conversation cuts at max_tokens): inputs (T') its tokens but the last, targets (T') the
// next token where the mask marks it a target (the assistant's tokens and end token), else
// model::kIgnoreIndex. A batch is as wide as its longest row rounded up to a multiple of
// data.chat.bucket (at most T = data.seq_len); shorter rows are padded on the right with
// ignored targets. Attention is causal, so the padding after a row never reaches the row's own
// positions. Conversations are visited in a (seed, epoch) order, so the position {epoch,
// cursor} of a checkpoint resumes at any world size, as prepared windows do.
//
// data.chat.pack: several conversations per row instead (chat_packing.h), packed once when the
// data is opened (the training split in a seeded order, the validation split in file order);
// a sample is then a packed row, and the rows are visited in the (seed, epoch) order. Each
// batch carries "documents" (B, W), which keeps attention inside each conversation and restarts
// its positions (model/document_mask.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/bpe_tokenizer.h"
#include "data/token_split.h"
#include "train/training_data.h"

namespace lmtrain::train {

// One split's conversations: where each starts in the token split and how long it is.
class ChatSplit {
 public:
  // Opens DIR/<split>.bin and DIR/<split>_mask.bin; checks the mask against the ids (same
  // length and tokenizer, values 0-2, a conversation start first). Throws UsageError naming
  // the file.
  ChatSplit(const std::string& dir, const std::string& split, const data::BpeTokenizer& tokenizer);

  int64_t conversations() const { return static_cast<int64_t>(starts_.size()) - 1; }
  int64_t tokens() const { return static_cast<int64_t>(ids_.size()); }
  // Conversation i's first `max_len` tokens and their target flags (1 = a target).
  void conversation(int64_t i, int64_t max_len, std::vector<int64_t>* ids,
                    std::vector<uint8_t>* target) const;
  int64_t length(int64_t i) const;

 private:
  data::TokenSplit ids_, mask_;
  std::vector<int64_t> starts_;  // first token of each conversation, then the total
};

// Rows (each a conversation's tokens and target flags) into a batch on `device`: inputs and
// targets (B, W), W = the longest row's length - 1 rounded up to `bucket`, at most `seq_len`.
Batch chat_batch(const std::vector<std::vector<int64_t>>& ids,
                 const std::vector<std::vector<uint8_t>>& targets, int64_t seq_len, int64_t bucket,
                 const c10::Device& device);

class ChatData : public TrainingData {
 public:
  ChatData(const std::string& data_dir, int64_t seq_len, int64_t bucket, uint64_t seed,
           bool shuffle, bool pack = false);

  int64_t train_samples() const override {
    return pack_ ? static_cast<int64_t>(train_rows_.size()) : train_.conversations();
  }
  int64_t val_samples() const override {
    return pack_ ? static_cast<int64_t>(val_rows_.size()) : val_.conversations();
  }
  int64_t row_tokens() const override { return seq_len_; }
  Batch train_batch(int64_t epoch, const std::vector<int64_t>& positions,
                    const c10::Device& device) override;
  Batch val_batch(const std::vector<int64_t>& indices, const c10::Device& device) override;
  std::string sample_name() const override { return pack_ ? "packed rows" : "conversations"; }

  const std::string& tokenizer_path() const { return tokenizer_path_; }
  const data::BpeTokenizer& tokenizer() const { return tokenizer_; }

 private:
  // Samples of `split`: conversations, or with packing rows of `rows`.
  Batch batch_of(const ChatSplit& split, const std::vector<std::vector<int64_t>>& rows,
                 const std::vector<int64_t>& samples, const c10::Device& device) const;
  std::vector<std::vector<int64_t>> pack_split(const ChatSplit& split,
                                               const std::vector<int64_t>& order) const;

  std::string tokenizer_path_;
  data::BpeTokenizer tokenizer_;
  ChatSplit train_, val_;
  int64_t seq_len_, bucket_;
  uint64_t seed_;
  bool shuffle_, pack_;
  std::vector<std::vector<int64_t>> train_rows_, val_rows_;  // packed: conversations per row
  int64_t order_epoch_ = -1;
  std::vector<int64_t> order_;
};

}  // namespace lmtrain::train
