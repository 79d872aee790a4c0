#include "model/param_init.h"

#include <algorithm>
#include <cmath>

#include "model/gpt.h"
#include "model/lora_adapter.h"
#include "model/moe.h"

namespace lmtrain::model {

void write_in_place(const std::string& /*name*/, at::Tensor& param, const InitFill& fill) {
  fill(param);
}

void init_model_weights(GptImpl& model, const InitWriter& write) {
  torch::NoGradGuard no_grad;
  const GptConfig& cfg = model.config();
  const ExpertPlacement experts = model.expert_placement();
  const auto& tags = model.param_tags();
  const double resid_std = cfg.init_std / std::sqrt(2.0 * cfg.n_layer);
  for (auto& item : model.named_parameters()) {
    auto& p = item.value();
    const auto& tag = tags.at(item.key());
    if (tag.lora) continue;  // init_lora_adapter_weights
    if (tag.expert && experts.count < cfg.moe.num_experts) {
      // Expert-parallel: draw the whole stack as one process would, keep this rank's experts,
      // so every layout starts from the same weights.
      const double sd = tag.init == InitRule::kResidualProj ? resid_std : cfg.init_std;
      write(item.key(), p, [&](at::Tensor& t) {
        auto sizes = t.sizes().vec();
        sizes[0] = cfg.moe.num_experts;
        auto full = torch::empty(sizes, t.options());
        full.normal_(0.0, sd);
        t.copy_(full.narrow(0, experts.first, experts.count));
      });
      continue;
    }
    write(item.key(), p,
          [&](at::Tensor& t) { init_parameter(t, tag.init, cfg.init_std, resid_std); });
  }
  for (auto& block : model.transformer->blocks) {
    if (auto* moe = block->mlp->moe_layer()) moe->expert_bias.zero_();  // a buffer, real
  }
  if (model.nanochat) init_nanochat_weights(*model.nanochat, cfg, "nanochat.", write);
  for (size_t i = 0; i < model.transformer->blocks.size(); ++i) {
    auto& attn = model.transformer->blocks[i]->attn;
    if (!attn->ve_gate) continue;
    write("transformer.h." + std::to_string(i) + ".attn.ve_gate.weight", attn->ve_gate->weight,
          [](at::Tensor& t) { t.uniform_(0.0, 0.02); });  // nanochat's
  }
}

void init_nanochat_weights(NanochatPartsImpl& parts, const GptConfig& cfg,
                           const std::string& prefix, const InitWriter& write) {
  torch::NoGradGuard no_grad;
  const int64_t L = cfg.n_layer;
  const double last = static_cast<double>(std::max<int64_t>(L - 1, 1));
  if (parts.resid_lambdas.defined()) {
    // No draws: the two (L,) vectors' order among the writes does not matter.
    write(prefix + "resid_lambdas", parts.resid_lambdas, [&](at::Tensor& t) {
      for (int64_t i = 0; i < L; ++i) t[i].fill_(1.15 - 0.10 * (static_cast<double>(i) / last));
    });
    write(prefix + "x0_lambdas", parts.x0_lambdas, [&](at::Tensor& t) {
      for (int64_t i = 0; i < L; ++i) t[i].fill_(0.20 - 0.15 * (static_cast<double>(i) / last));
    });
  }
  if (parts.smear_gate) {
    write(prefix + "smear_lambda", parts.smear_lambda, [](at::Tensor& t) { t.zero_(); });
    write(prefix + "smear_gate.weight", parts.smear_gate->weight,
          [](at::Tensor& t) { t.uniform_(0.0, 0.02); });
  }
  if (parts.backout_lambda.defined()) {
    write(prefix + "backout_lambda", parts.backout_lambda, [](at::Tensor& t) { t.fill_(0.2); });
  }
  const double s = std::sqrt(3.0) / std::sqrt(static_cast<double>(cfg.n_embd));
  for (size_t l = 0; l < parts.value_embeds.size(); ++l) {
    auto& ve = parts.value_embeds[l];
    if (!ve) continue;
    write(prefix + "value_embeds." + std::to_string(l) + ".weight", ve->weight,
          [s](at::Tensor& t) { t.uniform_(-s, s); });
  }
}

void init_lora_adapter_weights(GptImpl& model, const InitWriter& write) {
  torch::NoGradGuard no_grad;
  for (const auto& item : model.named_modules()) {
    auto* a = dynamic_cast<LoraAdapterImpl*>(item.value().get());
    if (!a) continue;
    // nn.Linear's and peft's kaiming_uniform_(a=sqrt(5)): bound 1 / sqrt(fan_in).
    const double bound = 1.0 / std::sqrt(static_cast<double>(a->lora_A.size(1)));
    write(item.key() + ".lora_A", a->lora_A, [bound](at::Tensor& t) { t.uniform_(-bound, bound); });
    write(item.key() + ".lora_B", a->lora_B, [](at::Tensor& t) { t.zero_(); });
  }
}

}  // namespace lmtrain::model
