// Activation checkpointing: a block's forward keeps only its input; backward runs the block
// again (same dropout masks, same autocast state) and differentiates that second forward.
// Trades one extra block forward for the block's internal activations (attention/MLP
// intermediates: ~10-20x the input's size per block).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace lmtrain::model {

// Which blocks are recomputed: none, every block, or every K-th block (layers 0, K, 2K, ...).
struct CheckpointPolicy {
  int64_t every = 0;  // 0 = none
  bool applies_to(int64_t layer) const { return every > 0 && layer % every == 0; }
  // "none" | "block" | "every:K"; throws UsageError naming train.activation_checkpointing.
  static CheckpointPolicy parse(const std::string& text);
};

// ys = fn(x), keeping only x (and `params`, which fn reads) for backward, where fn runs again.
// `params`: every tensor fn differentiates into besides x (the block's parameters): their
// gradients come out of this node, so gradient hooks on them fire as usual. Several outputs (a
// block's BlockOutput::to_tensors: y, an MoE layer's balancing loss and detached statistics):
// outputs that do not require grad in the forward come back as constants; the others get
// gradients from whichever of them the loss used.
std::vector<at::Tensor> checkpointed(
    const std::function<std::vector<at::Tensor>(const at::Tensor&)>& fn, const at::Tensor& x,
    const std::vector<at::Tensor>& params);

}  // namespace lmtrain::model
