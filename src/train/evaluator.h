// Mean loss of a model over the first `batches` micro-batches of a split (no shuffle), with
// the windows spread over ranks the same way as in training.
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

// Runs on rt's device under its autocast; the losses are summed there and read once.
// `progress` (lmtrain eval; the trainer passes none) is told each micro-batch.
double evaluate(model::GptImpl& model, data::WindowStream& split, int64_t micro_batch,
                int64_t batches, dist::Group& group, const core::Runtime& rt = core::Runtime::cpu(),
                core::Progress* progress = nullptr);

}  // namespace lmtrain::train
