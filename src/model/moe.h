// The Mixture-of-Experts feed-forward: a router picks top_k of num_experts expert MLPs per
// token, the tokens are sorted by expert and run as grouped GEMMs, and the gate-weighted outputs
// are summed back per token; optional shared experts see every token. Dropped tokens (capacity
// mode) get no routed output and pass through on the residual.
//
// Parameters (HF transformers 5.x layout, so import/export is a rename):
//   router.weight     (E, C)            router logits = x W^T, computed in fp32
//   experts.c_fc.weight   (E_local, fc, C)  fc = 2 * expert_hidden for SwiGLU ([gate; up])
//   experts.c_proj.weight (E_local, C, expert_hidden)
//   shared.c_fc / shared.c_proj       a dense MLP of shared_experts * expert_hidden
// Buffer expert_bias (E) fp32: DeepSeek-V3's selection bias, updated by the trainer.
#pragma once
#include <memory>

#include "model/expert_dispatcher.h"
#include "model/feed_forward.h"
#include "model/gpt_config.h"
#include "model/layers.h"
#include "model/mlp.h"
#include "model/moe_routing.h"
#include "model/param_tags.h"

namespace lmtrain::model {

// Stacked expert weights (E_local, out, in) applied by grouped_linear.
class ExpertLinearImpl : public TaggedModule {
 public:
  ExpertLinearImpl(int64_t experts, int64_t in, int64_t out, InitRule init);
  torch::Tensor weight;
};
TORCH_MODULE(ExpertLinear);

class ExpertsImpl : public torch::nn::Module {
 public:
  ExpertsImpl(const GptConfig& cfg, ExpertPlacement placement);
  // rows (R, C) sorted by local expert -> (R, C).
  torch::Tensor forward(const torch::Tensor& rows, const ExpertGroups& groups);
  ExpertLinear c_fc{nullptr}, c_proj{nullptr};
  MlpKind kind;  // as the dense MLP
  int64_t hidden;
};
TORCH_MODULE(Experts);

class MoeImpl : public FeedForwardImpl {
 public:
  MoeImpl(const GptConfig& cfg, ExpertPlacement placement);
  // x (B, T, C) -> y (B, T, C) and the layer's balance terms (feed_forward.h).
  FeedForwardOutput run(const torch::Tensor& x) override;
  MoeImpl* moe_layer() override { return this; }
  void set_dispatcher(std::shared_ptr<ExpertDispatcher> d) { dispatcher_ = std::move(d); }
  // The processes this layer's tokens are split over (sequence parallelism): its loads and
  // balancing losses are then totals over all of them (moe_routing.h).
  void set_token_shards(TokenShards shards) { token_shards_ = std::move(shards); }

  Linear router{nullptr};     // weight (E, C)
  torch::Tensor expert_bias;  // (E) fp32 buffer
  Experts experts{nullptr};
  Mlp shared{nullptr};  // null without shared experts
  MoeConfig moe;

 private:
  std::shared_ptr<ExpertDispatcher> dispatcher_;
  TokenShards token_shards_;
};
TORCH_MODULE(Moe);

}  // namespace lmtrain::model
