// Training data of a temporal-encoder run (issue 26): time-series QA samples
// (data/temporal/temporal_sample.h) as token rows with soft-token slots, for
// TemporalAlignmentObjective (objective/temporal_objective.h).
//
// A sample's row: the prompt's text pieces, and at each "<ts><ts/>" placeholder the series'
// statistics as text ("[length 256, mean 3.2, std 0.8]": normalisation removes them from what
// the encoder sees, so the prompt states them, as ChatTS does) followed by one slot per soft token
// the encoder gives that series; then the answer and <|endoftext|>. Only the answer's tokens and
// the <|endoftext|> after it are targets. Rows are padded to T tokens (targets ignored) and
// series to model.temporal.max_length values (masked), so every batch has the same shapes.
//
// The samples: those of data.temporal.dir, or generated on the fly (data.temporal.online, equal
// to the cached ones); the last data.temporal.val_fraction of them are the validation split (a
// class-balanced block: the generator balances every contiguous block; at least one sample, none
// when the fraction is 0), the rest train, visited in a (seed, epoch) order.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/bpe_tokenizer.h"
#include "data/temporal/temporal_sample.h"
#include "model/temporal/temporal_options.h"
#include "train/training_data.h"

namespace lmtrain::train {

// Samples by index: a loaded set, or the generator.
struct TemporalSampleSource {
  int64_t size = 0;
  int64_t max_series = 1;  // K: the most series any sample has
  std::function<data::temporal::TemporalSample(int64_t)> get;
};

// A sample as the LM sees it.
struct TemporalRow {
  std::vector<int64_t> tokens;     // prompt (with slot placeholders), answer, <|endoftext|>
  std::vector<uint8_t> soft_slot;  // per token: 1 where a soft token stands
  int64_t answer_begin = 0;        // tokens[answer_begin..] are the answer and <|endoftext|>
  std::vector<data::temporal::SeriesValues> series;
};

// The prompt of `sample` as token ids with soft-token slots (no answer): what generate and the
// QA eval feed the model, and the first part of every training row. `slot_id` fills the slots
// (the soft tokens replace its embedding). Throws UsageError naming `sample_name` when the
// placeholders do not match the series or a series does not fit the encoder.
TemporalRow temporal_prompt(const data::temporal::TemporalSample& sample,
                            const data::BpeTokenizer& tokenizer,
                            const model::temporal::TemporalEncoderOptions& encoder,
                            const std::string& sample_name);

// The training row of `sample`: its prompt, then its answer (sample.output) and <|endoftext|>.
TemporalRow temporal_row(const data::temporal::TemporalSample& sample,
                         const data::BpeTokenizer& tokenizer,
                         const model::temporal::TemporalEncoderOptions& encoder,
                         const std::string& sample_name);

struct TemporalBatchShape {
  int64_t seq_len = 0;                              // T
  int64_t max_series = 1;                           // K
  model::temporal::TemporalEncoderOptions encoder;  // channels C, max_length L, patching
};

// Rows into a batch: "inputs"/"targets" (B, T), "series"/"series_valid" (B, K, C, L),
// "series_used" (B, K), "soft_slots" (B, T), on `device`. A row longer than T + 1 tokens is a
// UsageError naming it (raise data.seq_len).
Batch temporal_batch(const std::vector<TemporalRow>& rows, const std::vector<std::string>& names,
                     const TemporalBatchShape& shape, int64_t pad_id, const c10::Device& device);

class TemporalData : public TrainingData {
 public:
  TemporalData(TemporalSampleSource source, data::BpeTokenizer tokenizer, TemporalBatchShape shape,
               double val_fraction, uint64_t seed, bool shuffle, std::string origin);

  int64_t train_samples() const override { return train_; }
  int64_t val_samples() const override { return source_.size - train_; }
  int64_t row_tokens() const override { return shape_.seq_len; }
  Batch train_batch(int64_t epoch, const std::vector<int64_t>& positions,
                    const c10::Device& device) override;
  Batch val_batch(const std::vector<int64_t>& indices, const c10::Device& device) override;
  std::string sample_name() const override { return "samples"; }

  // The training row of sample `index` (of the whole set: train then val).
  TemporalRow row(int64_t index) const;
  // Sample `index` of the validation split, and the whole-set index it has.
  data::temporal::TemporalSample val_sample(int64_t index) const;
  const data::BpeTokenizer& tokenizer() const { return tokenizer_; }
  const TemporalBatchShape& shape() const { return shape_; }

 private:
  Batch batch_of(const std::vector<int64_t>& sample_indices, const c10::Device& device) const;

  TemporalSampleSource source_;
  data::BpeTokenizer tokenizer_;
  TemporalBatchShape shape_;
  int64_t train_ = 0;
  uint64_t seed_;
  bool shuffle_;
  std::string origin_;  // where the samples come from, for messages
  int64_t order_epoch_ = -1;
  std::vector<int64_t> order_;
};

}  // namespace lmtrain::train
