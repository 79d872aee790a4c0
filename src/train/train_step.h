// One optimizer step: accumulate gradients over micro-batches, average them across ranks,
// clip by global norm, update. Shared by `train` and `bench`.
#pragma once
#include <functional>
#include <utility>

#include "dist/group.h"
#include "model/gpt.h"
#include "optim/adamw.h"
#include "optim/flat_params.h"

namespace lmtrain::train {

struct StepResult {
  double loss = 0;       // mean over the global batch
  double grad_norm = 0;  // before clipping
};

// Returns (inputs, targets), each (B, T) int64, for micro-step m.
using MicroBatchFn = std::function<std::pair<torch::Tensor, torch::Tensor>(int64_t m)>;

StepResult train_step(model::GptImpl& model, optim::FlatParams& flat, optim::AdamW& opt,
                      dist::Group& group, int64_t accum_steps, const MicroBatchFn& next_batch,
                      double lr, double grad_clip);

}  // namespace lmtrain::train
