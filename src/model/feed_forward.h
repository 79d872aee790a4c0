// A block's feed-forward slot: the dense MLP (mlp.h) or the Mixture-of-Experts layer (moe.h)
// behind one interface, so that blocks, the model and LoRA never branch on which one a layer
// holds nor unpack results by position. Both register as the block's "mlp" (Hugging Face's
// names), so checkpoints are unchanged.
#pragma once
#include <torch/types.h>

#include "model/param_tags.h"

namespace lmtrain::model {

class MlpImpl;
class MoeImpl;

// Detached per-layer statistics of one MoE forward, for logs and the balancing bias.
struct MoeStats {
  at::Tensor load;     // (E) fp32: assignments per expert before capacity
  at::Tensor dropped;  // fp32 scalar: assignments dropped by capacity
  at::Tensor aux;      // fp32 scalar: load-balancing loss (unweighted)
  at::Tensor z;        // fp32 scalar: router z-loss (unweighted)
};

// An MoE layer's contribution to the training objective: the weighted balancing losses (with
// grad) and its statistics.
struct MoeBalance {
  torch::Tensor objective;  // fp32 scalar: aux_loss_coef * aux + z_loss_coef * z
  MoeStats stats;
};

struct FeedForwardOutput {
  torch::Tensor y;  // (B, T, C)
  // MoE layers only (objective undefined for a dense MLP).
  MoeBalance balance;
};

class FeedForwardImpl : public TaggedModule {
 public:
  // x (B, T, C) -> y (B, T, C) (+ the balance terms of an MoE layer).
  virtual FeedForwardOutput run(const torch::Tensor& x) = 0;
  // The concrete layer behind the slot: exactly one of them is non-null.
  virtual MlpImpl* dense() { return nullptr; }
  virtual MoeImpl* moe_layer() { return nullptr; }
};

}  // namespace lmtrain::model
