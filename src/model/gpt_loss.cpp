// GptImpl's training losses (model/gpt.h): the cross-entropy of the head over the final hidden
// states (fused, chunked, or through the logits) and the MoE layers' balance terms.
#include <ATen/autocast_mode.h>

#include "model/chunked_cross_entropy.h"
#include "model/fused_cross_entropy.h"
#include "model/gpt.h"

namespace lmtrain::model {

torch::Tensor GptImpl::loss(const torch::Tensor& ids, const torch::Tensor& targets) {
  return cross_entropy(hidden(ids, 0, nullptr), targets);
}

LossTerms GptImpl::loss_terms(const torch::Tensor& ids, const torch::Tensor& targets, bool masked,
                              const SoftTokens* soft, const DocumentLayout* docs) {
  LossTerms t;
  HiddenTaps taps;
  t.ce = cross_entropy(hidden(ids, 0, nullptr, &taps, soft, docs), targets, masked);
  add_moe_terms(taps.moe, t);
  return t;
}

void GptImpl::add_moe_terms(const std::vector<MoeBalance>& moe, LossTerms& t) {
  for (const auto& layer : moe) {
    t.moe_objective =
        t.moe_objective.defined() ? t.moe_objective + layer.objective : layer.objective;
    t.moe_stats.push_back(layer.stats);
  }
  if (!moe.empty()) t.moe_objective = t.moe_objective / static_cast<double>(moe.size());
}

torch::Tensor GptImpl::cross_entropy(const torch::Tensor& x_in, const torch::Tensor& targets_in,
                                     bool masked) {
  if (loss_head_) return loss_head_(x_in, targets_in);
  const auto& w = head_weight();
  auto x = x_in.reshape({-1, x_in.size(-1)});  // (N, C)
  auto targets = targets_in.reshape({-1});     // (N,)
  if (masked) {
    // Keep the rows with a target; none left still gives a (zero) loss with a graph, so the
    // backward (and the gradient-sync hooks it fires) runs on every rank.
    auto keep = valid_target_rows(targets);
    if (keep.numel() == 0) return x.sum() * 0.0;
    x = x.index_select(0, keep);
    targets = targets.index_select(0, keep);
  }
  // A LoRA adapter on the head is not in `w`: then the head runs unfused. Otherwise the CPU's
  // fp32 kernel (no soft cap), or on a GPU (and under autocast on a CPU) the chunked path,
  // which never holds the whole (N, V) logits.
  if (!head_has_adapter()) {
    if (cfg_.logit_softcap <= 0 && fused_cross_entropy_supported(x, w)) {
      return fused_linear_cross_entropy(x, w, targets);
    }
    if (x.is_cuda() || at::autocast::is_autocast_enabled(x.device().type())) {
      return chunked_linear_cross_entropy(x, w, targets, cfg_.logit_softcap);
    }
  }
  return torch::cross_entropy_loss(head(x), targets);
}

}  // namespace lmtrain::model
