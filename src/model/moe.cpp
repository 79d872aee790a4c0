#include "model/moe.h"

#include <ATen/ATen.h>

#include "core/runtime.h"
#include "model/fused_moe_rows.h"
#include "model/grouped_linear.h"
#include "model/moe_routing.h"

namespace lmtrain::model {

ExpertLinearImpl::ExpertLinearImpl(int64_t experts, int64_t in, int64_t out, InitRule init) {
  ParamTag tag;
  tag.init = init;
  tag.expert = true;
  weight = register_tagged("weight", torch::empty({experts, out, in}), tag);
}

ExpertsImpl::ExpertsImpl(const GptConfig& cfg, ExpertPlacement p)
    : kind(cfg.mlp), hidden(cfg.moe.expert_hidden) {
  const int64_t fc = mlp_fc_rows(kind, hidden);
  c_fc = register_module("c_fc", ExpertLinear(p.count, cfg.n_embd, fc, InitRule::kNormal));
  c_proj =
      register_module("c_proj", ExpertLinear(p.count, hidden, cfg.n_embd, InitRule::kResidualProj));
}

torch::Tensor ExpertsImpl::forward(const torch::Tensor& rows, const ExpertGroups& groups) {
  auto h = mlp_activation(grouped_linear(rows, c_fc->weight, groups), kind, hidden);  // (R, H)
  return grouped_linear(h, c_proj->weight, groups);                                   // (R, C)
}

MoeImpl::MoeImpl(const GptConfig& cfg, ExpertPlacement placement)
    : moe(cfg.moe), dispatcher_(std::make_shared<LocalExpertDispatcher>()) {
  router = register_module("router", Linear(cfg.n_embd, moe.num_experts, false));
  experts = register_module("experts", Experts(cfg, placement));
  if (moe.shared_experts > 0) {
    GptConfig shared_cfg = cfg;
    shared_cfg.mlp_hidden = moe.shared_experts * moe.expert_hidden;
    shared = register_module("shared", Mlp(shared_cfg));
  }
  expert_bias = register_buffer("expert_bias", torch::zeros({moe.num_experts}));
}

FeedForwardOutput MoeImpl::run(const torch::Tensor& x) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), E = moe.num_experts;
  const int64_t k = moe.top_k;
  auto flat = x.reshape({B * T, C});  // (N, C)
  torch::Tensor logits;
  {
    // Router in fp32 whatever the compute dtype: small logit differences decide the experts.
    core::AutocastScope fp32(x.device().type(), false, at::kFloat);
    logits = torch::linear(flat.to(at::kFloat), router->weight.to(at::kFloat));  // (N, E)
  }
  const auto routing = route(logits, moe.bias_update_rate > 0 ? expert_bias : at::Tensor(), k,
                             moe.gate, moe.renormalize);
  // One process's plan for this process's tokens, whatever shards they are split into.
  const auto plan =
      plan_dispatch_sharded(routing.expert.view({B, T, k}), E, moe.capacity_factor, token_shards_);

  // Rows sorted by expert through the (local or expert-parallel) dispatcher, and back: the
  // permute and the weighted combine (model/fused_moe_rows.h).
  auto rows = moe_permute(flat, plan, k);  // (M, C)
  auto out_rows = dispatcher_->run(
      rows, plan.counts,
      [this](const at::Tensor& r, const ExpertGroups& g) { return experts(r, g); });
  auto y = moe_combine(out_rows, routing.weight, plan, x.scalar_type());  // (N, C)
  if (shared) y = y + shared->forward(flat).to(y.scalar_type());

  FeedForwardOutput out;
  out.y = y.view({B, T, C});
  // Token statistics over every shard of the forward's tokens (one, unless the plan split them).
  auto load = token_shards_.total(plan.load);  // (E)
  auto aux = load_balancing_loss(routing.scores, load, moe.gate, token_shards_);
  auto z = router_z_loss(logits, token_shards_);
  out.balance.objective = aux * moe.aux_loss_coef + z * moe.z_loss_coef;
  out.balance.stats.load = load;
  // A host count only under a capacity, which reads the counts anyway; dropless it is 0, and
  // scalar_tensor on a GPU is a fill: nothing in the layer reads the device back, so it can run
  // inside a CUDA graph (cli::check_cuda_graphs_config).
  out.balance.stats.dropped = torch::scalar_tensor(static_cast<double>(plan.dropped),
                                                   logits.options().requires_grad(false));
  out.balance.stats.aux = aux.detach();
  out.balance.stats.z = z.detach();
  return out;
}

}  // namespace lmtrain::model
