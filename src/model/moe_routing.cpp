#include "model/moe_routing.h"

#include <ATen/ATen.h>

#include <cmath>
#include <utility>
#include <vector>

namespace lmtrain::model {

Routing route(const at::Tensor& logits, const at::Tensor& bias, int64_t top_k, MoeGate gate,
              bool renormalize) {
  Routing r;
  r.scores = gate == MoeGate::kSigmoid ? at::sigmoid(logits) : at::softmax(logits, -1);
  at::Tensor choice = r.scores.detach();
  if (bias.defined()) choice = choice + bias.to(choice.scalar_type());
  // Stable descending sort: equal scores keep index order, unlike topk's unspecified ties.
  r.expert = std::get<1>(at::sort(choice, /*stable=*/true, /*dim=*/-1, /*descending=*/true))
                 .narrow(-1, 0, top_k)
                 .contiguous();  // (N, k)
  r.weight = r.scores.gather(-1, r.expert);
  if (renormalize) r.weight = r.weight / r.weight.sum(-1, /*keepdim=*/true);
  return r;
}

DispatchPlan plan_dispatch(const at::Tensor& expert, int64_t num_experts, double capacity_factor) {
  DispatchPlan p;
  const int64_t N = expert.size(0), k = expert.size(1);
  // Slot-major order (all first choices, then all second choices, ...) so that a stable sort by
  // expert ranks each expert's assignments by priority.
  auto by_slot = expert.t().reshape({-1});  // (k N): entry j * N + t
  auto [sorted, perm] = at::sort(by_slot, /*stable=*/true, /*dim=*/0, /*descending=*/false);
  auto token = perm.remainder(N);
  auto slot = token * k + perm.div(N, "floor");
  // (E) int64. Not bincount: on a GPU it reads min and max back to the host first. Without a
  // capacity the counts stay on the device (the grouped GEMMs take device offsets); only what
  // needs them on the host reads them (model/expert_groups.h).
  auto counts_t =
      at::zeros({num_experts}, by_slot.options()).scatter_add_(0, by_slot, at::ones_like(by_slot));
  p.load = counts_t.to(at::kFloat);
  p.counts = ExpertGroups::on_device(counts_t);
  if (capacity_factor > 0) {
    std::vector<int64_t> kept_counts = p.counts.host();
    const auto capacity = static_cast<int64_t>(
        std::ceil(capacity_factor * static_cast<double>(N * k) / static_cast<double>(num_experts)));
    // Rank of each sorted assignment inside its expert's group.
    auto starts = at::cumsum(counts_t, 0) - counts_t;  // (E)
    auto rank = at::arange(N * k, perm.options()) - starts.index_select(0, sorted);
    int64_t kept = 0;
    for (auto& n : kept_counts) {
      if (n > capacity) {
        p.dropped += n - capacity;
        n = capacity;
      }
      kept += n;
    }
    p.counts = ExpertGroups(std::move(kept_counts));
    // The kept assignments in order; their number is known on the host, so no read-back of a
    // mask's count (masked_select / nonzero would wait for the GPU).
    auto kept_at = at::nonzero_static(rank.lt(capacity), kept).squeeze(1);  // (kept,)
    token = token.index_select(0, kept_at);
    slot = slot.index_select(0, kept_at);
  }
  p.token = token;
  p.slot = slot;
  return p;
}

at::Tensor load_balancing_loss(const at::Tensor& scores, const at::Tensor& load, MoeGate gate) {
  const int64_t N = scores.size(0), E = scores.size(1);
  auto probs = gate == MoeGate::kSigmoid ? scores / scores.sum(-1, /*keepdim=*/true) : scores;
  auto mean_prob = probs.mean(0);  // (E)
  return static_cast<double>(E) *
         (load.to(mean_prob.scalar_type()) / static_cast<double>(N) * mean_prob).sum();
}

at::Tensor router_z_loss(const at::Tensor& logits) {
  return at::logsumexp(logits, -1).square().mean();
}

}  // namespace lmtrain::model
