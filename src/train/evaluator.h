// Mean loss of a model over the first `batches` micro-batches of a split (no shuffle), with
// the windows spread over ranks the same way as in training.
#pragma once
#include <cstdint>

#include "dist/group.h"
#include "model/gpt.h"

namespace lmtrain::data {
class WindowStream;
}

namespace lmtrain::train {

double evaluate(model::GptImpl& model, data::WindowStream& split, int64_t micro_batch,
                int64_t batches, dist::Group& group);

}  // namespace lmtrain::train
