// The CPU generator's state, which a training checkpoint stores beside the optimizer state
// (optim.rank0.safetensors, tensor kRngTensor) so that a resumed run draws what the
// uninterrupted one would have drawn.
#pragma once
#include <ATen/core/Tensor.h>

namespace lmtrain::train {

inline constexpr const char* kRngTensor = "rng.cpu_state";
// The objective's own trained parameters (checkpoint/training_checkpoint.h).
inline constexpr const char* kObjectiveFile = "objective.safetensors";

at::Tensor cpu_rng_state();
void set_cpu_rng_state(const at::Tensor& state);

}  // namespace lmtrain::train
