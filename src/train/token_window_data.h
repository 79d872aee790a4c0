// Training data of a language-model run: windows of T + 1 tokens of a prepared corpus
// (data.dir: tokenizer.json, and train.bin + val.bin or their pieces train_00000.bin ...), in
// data/window_stream.h's per-epoch order, and with an offline distillation teacher the cached top-k
// logits of the same windows
// ("teacher_logits", "teacher_index").
#pragma once
#include <memory>
#include <string>

#include "data/bpe_tokenizer.h"
#include "data/token_split.h"
#include "data/window_stream.h"
#include "distill/teacher_cache.h"
#include "train/training_data.h"

namespace lmtrain::train {

class TokenWindowData : public TrainingData {
 public:
  // Opens data_dir's tokenizer and shards (checking the shards were encoded with it) and makes
  // windows of seq_len tokens, shuffled per epoch by `seed` when `shuffle`.
  TokenWindowData(const std::string& data_dir, int64_t seq_len, uint64_t seed, bool shuffle);

  int64_t train_samples() const override { return train_stream_.num_windows(); }
  int64_t val_samples() const override { return val_stream_.num_windows(); }
  int64_t row_tokens() const override { return train_stream_.seq_len(); }
  Batch train_batch(int64_t epoch, const std::vector<int64_t>& positions,
                    const c10::Device& device) override;
  Batch val_batch(const std::vector<int64_t>& indices, const c10::Device& device) override;
  std::string sample_name() const override { return "windows"; }

  // Adds the cached teacher's top-k of every training window to the training batches.
  void set_teacher_cache(std::unique_ptr<TeacherCache> cache) { teacher_cache_ = std::move(cache); }
  const TeacherCache* teacher_cache() const { return teacher_cache_.get(); }

  const data::BpeTokenizer& tokenizer() const { return tokenizer_; }
  const std::string& tokenizer_path() const { return tokenizer_path_; }
  const data::TokenSplit& train_shard() const { return train_shard_; }
  const data::WindowStream& train_stream() const { return train_stream_; }

 private:
  std::string tokenizer_path_;
  data::BpeTokenizer tokenizer_;
  data::TokenSplit train_shard_, val_shard_;
  data::WindowStream train_stream_, val_stream_;
  std::unique_ptr<TeacherCache> teacher_cache_;
};

}  // namespace lmtrain::train
