// The MoE feed-forward against a straightforward reference: a loop over tokens and their chosen
// experts, each expert an ordinary MLP on one token. Forward and backward (input, router and
// expert gradients), dropless and with capacity (first choices before second choices, then token
// order), the balancing losses against their formulas, the selection bias, deterministic ties,
// the grouped GEMM against per-expert GEMMs, and activation checkpointing of MoE blocks.
#include "model/moe.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <map>

#include "core/error.h"
#include "model/activation_checkpoint.h"
#include "model/fused_gelu.h"
#include "model/gpt.h"
#include "model/grouped_linear.h"
#include "model/moe_routing.h"
#include "model_fixtures.h"

namespace lmtrain::model {
namespace {

GptConfig moe_config(MlpKind mlp, int64_t experts, int64_t k, double capacity) {
  auto c = tiny_moe_config(mlp, experts, k);
  c.moe.capacity_factor = capacity;
  return c;
}

at::Tensor expert_mlp(const MoeImpl& m, int64_t e, const at::Tensor& x) {
  auto h = at::matmul(x, m.experts->c_fc->weight[e].t());
  const int64_t H = m.experts->hidden;
  if (m.experts->kind == MlpKind::kSwiGlu) {
    h = at::silu(h.narrow(-1, 0, H)) * h.narrow(-1, H, H);
  } else if (m.experts->kind == MlpKind::kRelu2) {
    h = at::relu(h).square();
  } else {
    h = gelu_tanh(h);
  }
  return at::matmul(h, m.experts->c_proj->weight[e].t());
}

// Loop reference of MoeImpl::forward for a softmax gate: y_t = sum_j w_tj * expert_{e_tj}(x_t),
// skipping assignments over capacity (priority: slot, then token).
at::Tensor reference_moe(const MoeImpl& m, const at::Tensor& x, int64_t* dropped = nullptr) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), E = m.moe.num_experts;
  const int64_t k = m.moe.top_k, N = B * T;
  auto flat = x.reshape({N, C});
  auto probs = at::softmax(at::matmul(flat, m.router->weight.t()), -1);  // (N, E)
  auto [top, idx] = probs.topk(k, -1);
  if (m.moe.renormalize) top = top / top.sum(-1, true);
  int64_t capacity = N * k;
  if (m.moe.capacity_factor > 0) {
    capacity = static_cast<int64_t>(std::ceil(m.moe.capacity_factor * N * k / E));
  }
  std::vector<int64_t> used(E, 0);
  std::vector<std::vector<bool>> keep(N, std::vector<bool>(k, false));
  int64_t drops = 0;
  for (int64_t j = 0; j < k; ++j) {
    for (int64_t t = 0; t < N; ++t) {
      const int64_t e = idx[t][j].item<int64_t>();
      keep[t][j] = used[e] < capacity;
      used[e] += keep[t][j] ? 1 : 0;
      drops += keep[t][j] ? 0 : 1;
    }
  }
  if (dropped) *dropped = drops;
  std::vector<at::Tensor> rows;
  for (int64_t t = 0; t < N; ++t) {
    auto y = at::zeros({C});
    for (int64_t j = 0; j < k; ++j) {
      if (!keep[t][j]) continue;
      y = y + top[t][j] * expert_mlp(m, idx[t][j].item<int64_t>(), flat[t]);
    }
    rows.push_back(y);
  }
  return at::stack(rows).view({B, T, C});
}

std::map<std::string, at::Tensor> grads_of(MoeImpl& m, const at::Tensor& x) {
  std::map<std::string, at::Tensor> g;
  for (auto& p : m.named_parameters()) g[p.key()] = p.value().grad().clone();
  g["input"] = x.grad().clone();
  for (auto& p : m.parameters()) p.mutable_grad() = at::Tensor();
  x.mutable_grad() = at::Tensor();
  return g;
}

void init(MoeImpl& m, uint64_t seed) {
  torch::manual_seed(seed);
  torch::NoGradGuard no_grad;
  for (auto& p : m.parameters()) p.normal_(0, 0.3);
}

class MoeForward : public ::testing::TestWithParam<std::tuple<MlpKind, int64_t, double>> {};

TEST_P(MoeForward, MatchesTheLoopReferenceForwardAndBackward) {
  const auto [mlp, k, capacity] = GetParam();
  auto cfg = moe_config(mlp, 4, k, capacity);
  MoeImpl m(cfg, {0, 4});
  init(m, 1);
  auto x = torch::randn({3, 5, 16}).requires_grad_(true);
  auto out = m.run(x);
  int64_t dropped = 0;
  auto ref = reference_moe(m, x, &dropped);
  EXPECT_TRUE(torch::allclose(out.y, ref, 1e-5, 1e-5)) << (out.y - ref).abs().max();
  EXPECT_EQ(out.balance.stats.dropped.item<double>(), static_cast<double>(dropped));
  if (capacity > 0 && capacity < 1) {
    EXPECT_GT(dropped, 0) << "capacity mode must drop here";
  }
  auto probe = torch::randn_like(ref);
  (out.y * probe).sum().backward();
  auto got = grads_of(m, x);
  (ref * probe).sum().backward();
  auto want = grads_of(m, x);
  for (const auto& [name, g] : want) {
    EXPECT_TRUE(torch::allclose(got[name], g, 1e-4, 1e-5))
        << name << " max diff " << (got[name] - g).abs().max();
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, MoeForward,
                         ::testing::Values(std::make_tuple(MlpKind::kSwiGlu, 2, 0.0),
                                           std::make_tuple(MlpKind::kGelu, 2, 0.0),
                                           std::make_tuple(MlpKind::kRelu2, 1, 0.0),
                                           std::make_tuple(MlpKind::kSwiGlu, 2, 0.5),
                                           std::make_tuple(MlpKind::kGelu, 3, 0.75)));

TEST(MoeLosses, AuxAndZLossMatchTheirFormulas) {
  auto cfg = moe_config(MlpKind::kSwiGlu, 4, 2, 0);
  cfg.moe.aux_loss_coef = 0.3;
  cfg.moe.z_loss_coef = 0.05;
  MoeImpl m(cfg, {0, 4});
  init(m, 2);
  auto x = torch::randn({2, 6, 16});
  auto out = m.run(x);
  auto logits = at::matmul(x.reshape({12, 16}), m.router->weight.t());
  auto probs = at::softmax(logits, -1);
  auto idx = std::get<1>(probs.topk(2, -1));
  double aux = 0;
  for (int64_t e = 0; e < 4; ++e) {
    const double f = idx.eq(e).sum().item<double>() / 12.0;  // assignments over tokens
    aux += f * probs.select(1, e).mean().item<double>();
  }
  aux *= 4;
  double z = 0;
  for (int64_t t = 0; t < 12; ++t) {
    const double lse = std::log(logits[t].exp().sum().item<double>());
    z += lse * lse / 12.0;
  }
  EXPECT_NEAR(out.balance.stats.aux.item<double>(), aux, 1e-5);
  EXPECT_NEAR(out.balance.stats.z.item<double>(), z, 1e-4);
  EXPECT_NEAR(out.balance.objective.item<double>(), 0.3 * aux + 0.05 * z, 1e-4);
  // A perfectly even router gives top_k.
  auto even =
      load_balancing_loss(torch::full({8, 4}, 0.25), torch::full({4}, 4.0), MoeGate::kSoftmax);
  EXPECT_NEAR(even.item<double>(), 2.0, 1e-6);
  // The objective reaches the router weights.
  out.balance.objective.backward();
  ASSERT_TRUE(m.router->weight.grad().defined());
  EXPECT_GT(m.router->weight.grad().abs().sum().item<double>(), 0);
}

TEST(MoeRouting, BiasSteersSelectionButNotTheGateWeights) {
  auto logits = torch::randn({10, 4});
  auto plain = route(logits, {}, 2, MoeGate::kSigmoid, false);
  auto bias = torch::tensor({0.f, 0.f, 0.f, 10.f});
  auto biased = route(logits, bias, 2, MoeGate::kSigmoid, false);
  EXPECT_TRUE(biased.expert.select(1, 0).eq(3).all().item<bool>());  // everyone picks expert 3
  // Weights are the unbiased scores of the chosen experts.
  EXPECT_TRUE(torch::allclose(biased.weight, torch::sigmoid(logits).gather(1, biased.expert)));
  EXPECT_FALSE(torch::equal(plain.expert, biased.expert));
}

TEST(MoeRouting, TiesGoToTheLowerExpertAndCapacityKeepsFirstChoicesFirst) {
  auto r = route(torch::zeros({3, 4}), {}, 2, MoeGate::kSoftmax, true);
  EXPECT_TRUE(torch::equal(r.expert, torch::tensor({0, 1}).repeat({3, 1})));
  EXPECT_TRUE(torch::allclose(r.weight, torch::full({3, 2}, 0.5)));
  // Token 0 and 2 pick expert 1 first; token 1 picks it second. Capacity 2 (cf 1 * 3 * 2 / 3):
  // both first choices fit and the second choice is dropped.
  auto expert = torch::tensor({1, 0, 2, 1, 1, 2}).view({3, 2});
  auto plan = plan_dispatch(expert, 3, 1.0);
  EXPECT_EQ(plan.counts.host(), (std::vector<int64_t>{1, 2, 2}));
  EXPECT_EQ(plan.dropped, 1);
  EXPECT_TRUE(torch::equal(plan.token, torch::tensor({0, 0, 2, 1, 2})));
  EXPECT_TRUE(torch::equal(plan.slot, torch::tensor({1, 0, 4, 2, 5})));
  EXPECT_TRUE(torch::equal(plan.load, torch::tensor({1.f, 3.f, 2.f})));
}

TEST(MoeRouting, WithoutCapacityTheCountsStayOnTheDeviceUntilAsked) {
  // No capacity: nothing in planning reads the counts back (on a GPU, no sync per layer), and
  // the grouped GEMM takes device offsets; host() reads them when something needs them.
  auto expert = torch::tensor({1, 0, 2, 1, 1, 2}).view({3, 2});
  auto plan = plan_dispatch(expert, 3, 0.0);
  EXPECT_FALSE(plan.counts.on_host());
  EXPECT_TRUE(
      torch::equal(plan.counts.offsets(torch::kCPU), torch::tensor({1, 4, 6}, torch::kInt)));
  torch::manual_seed(8);
  auto x = torch::randn({6, 16}), w = torch::randn({3, 8, 16});
  auto y_device = grouped_linear(x, w, plan.counts);
  EXPECT_FALSE(plan.counts.on_host());  // the grouped-GEMM path read no host counts
  EXPECT_EQ(plan.counts.host(), (std::vector<int64_t>{1, 3, 2}));
  EXPECT_TRUE(plan.counts.on_host());
  EXPECT_TRUE(torch::equal(y_device, grouped_linear(x, w, ExpertGroups({1, 3, 2}))));
}

TEST(GroupedLinear, MatchesPerExpertGemmsOnBothPaths) {
  for (const int64_t width : {16, 6}) {  // 16: the grouped-GEMM path; 6: the loop
    torch::manual_seed(5);
    const std::vector<int64_t> counts{3, 0, 7, 2};
    auto x = torch::randn({12, width}).requires_grad_(true);
    auto w = torch::randn({4, 8, width}).requires_grad_(true);
    EXPECT_EQ(grouped_mm_supported(x, w), width == 16);
    auto y = grouped_linear(x, w, counts);
    std::vector<at::Tensor> parts;
    int64_t start = 0;
    for (int64_t e = 0; e < 4; ++e) {
      parts.push_back(at::matmul(x.narrow(0, start, counts[e]), w[e].t()));
      start += counts[e];
    }
    auto ref = at::cat(parts);
    EXPECT_TRUE(torch::allclose(y, ref, 1e-5, 1e-5));
    auto probe = torch::randn_like(ref);
    auto g = torch::autograd::grad({(y * probe).sum()}, {x, w});
    auto r = torch::autograd::grad({(ref * probe).sum()}, {x, w});
    EXPECT_TRUE(torch::allclose(g[0], r[0], 1e-5, 1e-5)) << width;
    EXPECT_TRUE(torch::allclose(g[1], r[1], 1e-5, 1e-5)) << width;
    EXPECT_EQ(g[1][1].abs().sum().item<double>(), 0.0);  // the empty group's gradient
  }
}

// The whole model: MoE blocks under activation checkpointing give the same loss terms and
// gradients as without, the balancing objective included.
TEST(MoeModel, ActivationCheckpointingKeepsObjectiveAndGradients) {
  auto cfg = moe_config(MlpKind::kSwiGlu, 4, 2, 0);
  cfg.moe.aux_loss_coef = 0.1;
  cfg.moe.z_loss_coef = 0.01;
  std::map<std::string, at::Tensor> first;
  double first_total = 0;
  for (const int64_t every : {0, 1}) {
    torch::manual_seed(7);
    Gpt m(cfg);
    m->set_checkpointing(CheckpointPolicy{every});
    m->train();
    torch::manual_seed(8);
    auto x = torch::randint(64, {2, 8});
    auto y = torch::randint(64, {2, 8});
    auto terms = m->loss_terms(x, y);
    ASSERT_EQ(terms.moe_stats.size(), 2u);
    auto total = terms.total();
    total.backward();
    if (every == 0) {
      first_total = total.item<double>();
      for (auto& p : m->named_parameters()) first[p.key()] = p.value().grad().clone();
      continue;
    }
    EXPECT_EQ(total.item<double>(), first_total);
    for (auto& p : m->named_parameters()) {
      EXPECT_TRUE(torch::equal(p.value().grad(), first[p.key()])) << p.key();
    }
  }
}

TEST(MoeModel, ParameterCountAndTagsCoverExperts) {
  auto cfg = moe_config(MlpKind::kSwiGlu, 4, 2, 0);
  cfg.moe.shared_experts = 1;
  Gpt m(cfg);
  int64_t n = 0;
  for (auto& p : m->parameters()) n += p.numel();
  EXPECT_EQ(n, cfg.num_params());
  const auto& tags = m->param_tags();
  EXPECT_TRUE(tags.at("transformer.h.0.mlp.experts.c_fc.weight").expert);
  EXPECT_FALSE(tags.at("transformer.h.0.mlp.router.weight").expert);
  EXPECT_FALSE(tags.at("transformer.h.0.mlp.shared.c_fc.weight").expert);
  EXPECT_FALSE(tags.at("transformer.wte.weight").decay);
  EXPECT_TRUE(tags.at("transformer.h.1.attn.c_attn.weight").block_matrix);
  EXPECT_EQ(cfg.active_params(), n - 2 * (4 - 2) * (16 * 48 + 24 * 16));
}

}  // namespace
}  // namespace lmtrain::model
