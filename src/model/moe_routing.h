// Token routing of an MoE layer, as pure functions of the router logits (no module state): gate
// scores, top-k selection, the dispatch plan (rows sorted by expert, capacity), and the
// load-balancing losses. Model code and the reference tests share them.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "model/expert_groups.h"
#include "model/moe_config.h"

namespace lmtrain::model {

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

// Switch/GShard balancing loss in HF Mixtral's form: E * sum_e (load_e / N) * P_e, with P_e the
// mean over tokens of expert e's probability (sigmoid scores normalised per token). Equals
// top_k for a perfectly even router.
at::Tensor load_balancing_loss(const at::Tensor& scores, const at::Tensor& load, MoeGate gate);

// Router z-loss (ST-MoE): mean over tokens of logsumexp(logits)^2.
at::Tensor router_z_loss(const at::Tensor& logits);

}  // namespace lmtrain::model
