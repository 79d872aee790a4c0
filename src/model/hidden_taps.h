// What a training or scoring forward hands out besides the final hidden states: intermediate
// activations an objective reads (distillation matches a student's hidden states and MoE outputs
// to a teacher's), and each MoE layer's balancing terms. The caller says which it wants; the
// forward fills the outputs.
#pragma once
#include <torch/types.h>

#include <vector>

#include "model/feed_forward.h"

namespace lmtrain::model {

struct HiddenTaps {
  // In: blocks whose output (B, T, C) to keep: the residual stream after block l, before any
  // later norm.
  std::vector<int64_t> block_layers;
  // In: keep each MoE layer's feed-forward output (B, T, C), the weighted sum of its experts
  // (shared experts included) before the residual add.
  bool moe_outputs = false;

  // Out, in block_layers order.
  std::vector<torch::Tensor> blocks;
  // Out, one per MoE layer in layer order, when moe_outputs.
  std::vector<torch::Tensor> moe_out;
  // Out: each MoE layer's balance terms, in layer order (GptImpl::add_moe_terms).
  std::vector<MoeBalance> moe;
};

}  // namespace lmtrain::model
