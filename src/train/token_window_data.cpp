#include "train/token_window_data.h"

#include "data/batch.h"
#include "data/prepared_data.h"

namespace lmtrain::train {

TokenWindowData::TokenWindowData(const std::string& data_dir, int64_t seq_len, uint64_t seed,
                                 bool shuffle)
    : tokenizer_path_(data::require_data_file(data_dir, "tokenizer.json")),
      tokenizer_(data::BpeTokenizer::load_hf(tokenizer_path_)),
      train_shard_(data::TokenSplit::open(data_dir, "train")),
      val_shard_(data::TokenSplit::open(data_dir, "val")),
      train_stream_(train_shard_, seq_len, seed, shuffle),
      val_stream_(val_shard_, seq_len, seed, false) {
  data::check_shard_hash(train_shard_, tokenizer_.hash());
  data::check_shard_hash(val_shard_, tokenizer_.hash());
  train_shard_.set_vocab_size(tokenizer_.vocab_size());
  val_shard_.set_vocab_size(tokenizer_.vocab_size());
}

Batch TokenWindowData::train_batch(int64_t epoch, const std::vector<int64_t>& positions,
                                   const c10::Device& device) {
  std::vector<int64_t> ids;
  ids.reserve(positions.size());
  for (int64_t p : positions) ids.push_back(train_stream_.window_at(epoch, p));
  auto [x, y] = data::make_batch(train_stream_, ids, device);
  auto batch = Batch::lm(std::move(x), std::move(y));
  if (teacher_cache_) {  // the offline teacher's top-k of the same windows
    auto [logits, index] = teacher_cache_->rows(ids, device);
    batch.tensors.emplace("teacher_logits", std::move(logits));
    batch.tensors.emplace("teacher_index", std::move(index));
  }
  return batch;
}

Batch TokenWindowData::val_batch(const std::vector<int64_t>& indices, const c10::Device& device) {
  auto [x, y] = data::make_batch(val_stream_, indices, device);
  return Batch::lm(std::move(x), std::move(y));
}

}  // namespace lmtrain::train
