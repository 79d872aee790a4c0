// What may run around each transformer block of a training or scoring forward, installed from
// outside the model (GptImpl::set_block_hooks), as PyTorch's forward pre-/post-hooks are:
// ZeRO-3 (parallel/fully_shard.h) gathers a block's parameters before its forward, frees them
// after it, and hooks the activations so that backward gathers them again. The model itself
// makes no collective call. Generation (a KV cache) runs without them.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace lmtrain::model {

class BlockHooks {
 public:
  virtual ~BlockHooks() = default;
  // Before block `layer` runs on its input x (B, T, C). May hook x's gradient (its
  // completion ends the block's backward); returns the tensor the block runs on.
  virtual at::Tensor before_block(int64_t layer, const at::Tensor& x) = 0;
  // After block `layer` (and its recompute wrapper, under activation checkpointing): its
  // outputs (BlockOutput::to_tensors: y (B, T, C) first) -> what the model continues with.
  virtual std::vector<at::Tensor> after_block(int64_t layer, std::vector<at::Tensor> outputs) = 0;
};

}  // namespace lmtrain::model
