// Mean loss of a model over the first `batches` micro-batches of a split (no shuffle), with
// the samples spread over ranks the same way as in training.
#pragma once
#include <cstdint>

#include "core/runtime.h"
#include "distributed/group.h"
#include "model/gpt.h"

namespace lmtrain::core {
class Progress;
}

namespace lmtrain::data {
class WindowStream;
}

namespace lmtrain::train {

class Objective;
class TrainingData;

// Runs on rt's device under its autocast; the losses are summed there and read once.
// `progress` (lmtrain eval; the trainer passes none) is told each micro-batch.
double evaluate(model::GptImpl& model, data::WindowStream& split, int64_t micro_batch,
                int64_t batches, dist::Group& group, const core::Runtime& rt = core::Runtime::cpu(),
                core::Progress* progress = nullptr);

// The validation split of `data` scored by `objective` (the run's loss without its training-only
// terms: the LM's cross-entropy, or the temporal objective's answer loss): the mean per valid
// target token over every rank's batches. Small splits wrap around, so every rank evaluates the
// same number of samples.
double evaluate(model::GptImpl& model, Objective& objective, TrainingData& data,
                int64_t micro_batch, int64_t batches, dist::Group& group,
                const core::Runtime& rt = core::Runtime::cpu());

}  // namespace lmtrain::train
