// What a training run draws its batches from (docs/architecture.md, "The seams"): token windows
// of a prepared corpus (token_window_data.h), or time-series QA rows with soft-token slots
// (temporal_data.h). Both are lists of samples visited in an order that depends only on
// (seed, epoch), so the data position {epoch, cursor} of a checkpoint determines what comes next
// at any world size, and the batch plan (batch_plan.h) spreads a step's samples over ranks the
// same way for either.
#pragma once
#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <vector>

#include "objective/objective.h"

namespace lmtrain::train {

class TrainingData {
 public:
  virtual ~TrainingData() = default;
  // Samples per epoch of the training split, and of the validation split.
  virtual int64_t train_samples() const = 0;
  virtual int64_t val_samples() const = 0;
  // Tokens per sample row (T): inputs and targets are (n, T).
  virtual int64_t row_tokens() const = 0;
  // The training samples at `positions` of epoch `epoch`'s order, as one batch on `device`.
  virtual Batch train_batch(int64_t epoch, const std::vector<int64_t>& positions,
                            const c10::Device& device) = 0;
  // Validation samples by index (in file order, no shuffle).
  virtual Batch val_batch(const std::vector<int64_t>& indices, const c10::Device& device) = 0;
  // What one sample is called in messages ("windows", "samples").
  virtual std::string sample_name() const = 0;
  // A stream (stream_data.h) is read in order, each rank its own part: it has no sample list
  // (train_samples() is 0), train_batch() ignores the positions' values and returns this rank's
  // next rows, and its position is per rank, not {epoch, cursor}.
  virtual bool streamed() const { return false; }
};

}  // namespace lmtrain::train
