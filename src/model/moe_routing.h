// Token routing of an MoE layer, as pure functions of the router logits (no module state): gate
// scores, top-k selection, the dispatch plan (rows sorted by expert, capacity), and the
// load-balancing losses. Model code and the reference tests share them.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "model/expert_groups.h"
#include "model/moe_config.h"

namespace lmtrain::model {

// How the tokens of one forward are split between processes that route them through the same
// (replicated) experts: under dist.tp with sequence parallelism each TP rank holds 1 / count of
// the positions (parallel/tensor_parallel_plan.h). The layer's statistics over tokens (expert
// loads, mean router probabilities, the z-loss's mean) are then totals over every shard, so the
// balancing losses equal one process's. Model code makes no collective call: `sum` is installed
// from outside (MoeImpl::set_token_shards); the default is one shard.
struct TokenShards {
  int64_t count = 1;
  int64_t index = 0;  // this shard's place: its positions come index-th along dim 1
  // A differentiable sum over the shards, same shape (forward: all-reduce; backward: identity,
  // each shard taking its own tokens' gradient of the replicated total); null for one shard.
  std::function<at::Tensor(const at::Tensor&)> sum;
  // Not differentiable: (B, T_local, ...) of every shard -> (B, T_local * count, ...), the
  // shards' positions in order (one process's tensor); null for one shard.
  std::function<at::Tensor(const at::Tensor&)> gather;
  at::Tensor total(const at::Tensor& x) const { return sum ? sum(x) : x; }
};

struct Routing {
  at::Tensor scores;  // (N, E) fp32: softmax or sigmoid of the logits
  at::Tensor expert;  // (N, k) int64: chosen experts, best first
  at::Tensor weight;  // (N, k) fp32: gate weights (differentiable into the router)
};

// logits (N, E) fp32. Selection ranks scores + bias (bias (E) or undefined: DeepSeek-V3's
// balancing bias steers the choice only), the weights come from the scores alone. Ties go to
// the lower expert index (stable sort), so routing is deterministic.
Routing route(const at::Tensor& logits, const at::Tensor& bias, int64_t top_k, MoeGate gate,
              bool renormalize);

// Which assignments run where. Assignment (token t, slot j) has flat index t * k + j.
struct DispatchPlan {
  at::Tensor token;  // (M) int64: token of each kept assignment, sorted by expert
  at::Tensor slot;   // (M) int64: its flat index t * k + j
  ExpertGroups counts{std::vector<int64_t>{}};  // (E) kept assignments per expert
  at::Tensor load;                              // (E) fp32: assignments per expert before capacity
  int64_t dropped = 0;                          // assignments over capacity
};

// expert (N, k). capacity_factor = 0: keep all (the counts stay on the device); > 0: each
// expert keeps at most
// ceil(cf * N * k / E) assignments, first slots first (every token's first choice before any
// second choice), then in token order.
DispatchPlan plan_dispatch(const at::Tensor& expert, int64_t num_experts, double capacity_factor);

// plan_dispatch for this shard's tokens, as one process plans all of them: expert (B, T_local, k)
// of this shard. Dropless, or for one shard, it is plan_dispatch of the flattened choices. With a
// capacity, what an expert keeps depends on every token's choices (slot first, then position in
// one process's (B, T) order), so the shards' choices are gathered, the whole forward's plan is
// made and cut to this shard's assignments (each expert's in the same order). load: this
// shard's, before capacity (the layer totals it); dropped: the whole forward's.
DispatchPlan plan_dispatch_sharded(const at::Tensor& expert, int64_t num_experts,
                                   double capacity_factor, const TokenShards& shards);

// Switch/GShard balancing loss in HF Mixtral's form: E * sum_e (load_e / N) * P_e, with P_e the
// mean over tokens of expert e's probability (sigmoid scores normalised per token). Equals
// top_k for a perfectly even router. Over several token shards, scores (N_local, E) are this
// shard's, `load` (E) already the total over the shards and N = N_local * shards.count: P_e is
// combined over the shards before the product (a product of per-shard means is not one).
at::Tensor load_balancing_loss(const at::Tensor& scores, const at::Tensor& load, MoeGate gate,
                               const TokenShards& shards = {});

// Router z-loss (ST-MoE): mean over all shards' tokens of logsumexp(logits)^2.
at::Tensor router_z_loss(const at::Tensor& logits, const TokenShards& shards = {});

}  // namespace lmtrain::model
