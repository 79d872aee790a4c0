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

DispatchPlan plan_dispatch_sharded(const at::Tensor& expert, int64_t num_experts,
                                   double capacity_factor, const TokenShards& shards) {
  const int64_t B = expert.size(0), Tl = expert.size(1), k = expert.size(2);
  const auto mine = expert.reshape({B * Tl, k});  // (N_local, k)
  if (shards.count == 1 || capacity_factor <= 0) {
    return plan_dispatch(mine, num_experts, capacity_factor);
  }
  const int64_t T = Tl * shards.count;
  const auto whole = shards.gather(expert.contiguous()).reshape({B * T, k});  // (N, k)
  const DispatchPlan all = plan_dispatch(whole, num_experts, capacity_factor);
  // all.token: b T + s of each kept assignment, grouped by expert; this shard's positions are
  // s in [index Tl, (index + 1) Tl), its token b Tl + s - index Tl. A capacity reads the counts
  // on the host anyway: nonzero's read-back costs no extra kind of sync.
  const auto b = all.token.div(T, "floor");
  const auto s = all.token.remainder(T) - shards.index * Tl;
  const auto kept = s.ge(0).logical_and(s.lt(Tl)).nonzero().squeeze(1);  // (M_local)
  DispatchPlan p;
  p.token = (b * Tl + s).index_select(0, kept);
  const auto choice = all.slot.index_select(0, kept) - all.token.index_select(0, kept) * k;
  p.slot = p.token * k + choice;
  const auto kept_expert = whole.reshape({-1}).index_select(0, all.slot.index_select(0, kept));
  auto counts = at::zeros({num_experts}, kept_expert.options())
                    .scatter_add_(0, kept_expert, at::ones_like(kept_expert))
                    .cpu()
                    .contiguous();
  p.counts = ExpertGroups(
      std::vector<int64_t>(counts.data_ptr<int64_t>(), counts.data_ptr<int64_t>() + num_experts));
  const auto flat = mine.reshape({-1});
  p.load = at::zeros({num_experts}, flat.options())
               .scatter_add_(0, flat, at::ones_like(flat))
               .to(at::kFloat);
  p.dropped = all.dropped;
  return p;
}

at::Tensor load_balancing_loss(const at::Tensor& scores, const at::Tensor& load, MoeGate gate,
                               const TokenShards& shards) {
  const int64_t N = scores.size(0) * shards.count, E = scores.size(1);
  auto probs = gate == MoeGate::kSigmoid ? scores / scores.sum(-1, /*keepdim=*/true) : scores;
  // (E): one shard keeps mean(0), bit for bit what it always computed.
  auto mean_prob =
      shards.count == 1 ? probs.mean(0) : shards.total(probs.sum(0)) / static_cast<double>(N);
  return static_cast<double>(E) *
         (load.to(mean_prob.scalar_type()) / static_cast<double>(N) * mean_prob).sum();
}

at::Tensor router_z_loss(const at::Tensor& logits, const TokenShards& shards) {
  auto sq = at::logsumexp(logits, -1).square();  // (N_local)
  if (shards.count == 1) return sq.mean();
  return shards.total(sq.sum()) / static_cast<double>(logits.size(0) * shards.count);
}

}  // namespace lmtrain::model
