// The tensor-parallel plan (parallel/tensor_parallel_plan.h) on a real two-rank Gloo group in
// one process, against the same model in one process: a GPT-2 block (tied head, learned
// positions, biases, GELU, blocks recomputed in backward) and a Qwen3-style one (RMSNorm, RoPE,
// SwiGLU, grouped-query attention with 4 query and 2 KV heads, QK-norm, untied head, soft-cap)
// and a nanochat one (value embeddings, smear across the shards, backout, lambdas, embed_norm):
// the loss equal within 1e-6 relative, every parameter's gradient equal to the slice the plan
// says this rank holds of the one-process gradient, the whole parameters back after a gather,
// and the shapes the plan refuses named by their keys. With dropout (residual, embedding and
// attention weights, blocks recomputed) the split run drops what one process drops, so it
// equals it too; a run without the split does not. MoE blocks (replicated experts) equal one
// process too, their balancing statistics included.
#include "parallel/tensor_parallel_plan.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "core/error.h"
#include "e2e/dist_harness.h"
#include "fused_op_checks.h"
#include "model/dropout.h"
#include "model/gpt.h"
#include "model_fixtures.h"

namespace lmtrain::parallel {
namespace {

// This rank's piece of a whole tensor, by a slice's ranges.
at::Tensor tp_test_piece(const at::Tensor& whole, const TpSlice& s) {
  if (!s.sharded()) return whole;
  std::vector<at::Tensor> parts;
  for (const auto& [b, e] : s.ranges) parts.push_back(whole.narrow(s.dim, b, e - b));
  return at::cat(parts, s.dim);
}

// With dropout, each forward/backward runs in a dropout scope of the same seed, as the trainer's
// steps do; `split_dropout` false gives the ranks no split (their masks then differ from one
// process's). Returns the largest relative loss difference of the two ranks.
// `prepare` runs on every model once built (the same seed's weights), before the split.
using TpTestPrepare = std::function<void(model::GptImpl&)>;
double tp_test_run(const model::GptConfig& cfg, bool recompute, bool split_dropout = true,
                   const TpTestPrepare& prepare = {});

void expect_tp_matches_one_process(const model::GptConfig& cfg, bool recompute,
                                   const TpTestPrepare& prepare = {}) {
  EXPECT_LE(tp_test_run(cfg, recompute, true, prepare), 1e-6);
}

double tp_test_run(const model::GptConfig& cfg, bool recompute, bool split_dropout,
                   const TpTestPrepare& prepare) {
  const uint64_t dropout_seed = 11;
  const int T = 2;
  torch::manual_seed(17);  // a fixed batch: see the scalars' bound below
  auto ids = torch::randint(cfg.vocab_size, {3, 17}, torch::kLong);
  auto inputs = ids.narrow(1, 0, 16), targets = ids.narrow(1, 1, 16);
  std::vector<model::Gpt> models;
  for (int i = 0; i < 1 + T; ++i) {  // built up front: the global RNG is not for two threads
    torch::manual_seed(3);
    models.emplace_back(cfg);
    models.back()->train();
    if (recompute) models.back()->set_checkpointing(model::CheckpointPolicy::parse("block"));
    if (prepare) prepare(*models.back());
  }
  auto& one = models[0];
  at::Tensor want_loss;
  // MoE layers: each layer's expert loads and unweighted balancing losses, stacked.
  auto moe_stats = [](const model::LossTerms& t) {
    std::vector<at::Tensor> rows;
    for (const auto& s : t.moe_stats)
      rows.push_back(
          at::cat({s.load, s.dropped.reshape({1}), s.aux.reshape({1}), s.z.reshape({1})}));
    return rows.empty() ? at::Tensor() : at::stack(rows).detach();
  };
  at::Tensor want_moe;
  {
    model::ScopedDropoutSeed scope(dropout_seed);
    const auto terms = one->loss_terms(inputs, targets);  // cross-entropy + MoE balancing losses
    want_loss = terms.total();
    want_moe = moe_stats(terms);
    want_loss.backward();
  }
  std::map<std::string, at::Tensor> want_grad, want_param;
  for (const auto& p : one->named_parameters()) {
    want_grad[p.key()] = p.value().grad().clone();
    want_param[p.key()] = p.value().detach().clone();
  }
  std::vector<double> losses(T);
  std::vector<at::Tensor> moe(T);
  std::vector<std::map<std::string, TpSlice>> slices(T);
  std::vector<std::map<std::string, at::Tensor>> grads(T), gathered(T), released(T);
  const auto errors = testing::run_ranks_in_process(T, [&](int r, dist::Group& group) {
    auto& m = models[1 + r];
    TensorParallel tp(*m, group);
    slices[r] = tp.slices();
    {
      model::ScopedDropoutSeed scope(dropout_seed,
                                     split_dropout ? tp.dropout_split() : model::DropoutSplit{});
      const auto terms = m->loss_terms(inputs, targets);
      auto loss = terms.total();
      loss.backward();
      losses[r] = loss.item<double>();
      moe[r] = moe_stats(terms);
    }
    for (const auto& p : m->named_parameters()) grads[r][p.key()] = p.value().grad().clone();
    tp.gather_whole();
    for (const auto& p : m->named_parameters()) gathered[r][p.key()] = p.value().detach().clone();
    tp.release_whole();
    for (const auto& p : m->named_parameters()) released[r][p.key()] = p.value().detach();
  });
  const double ref = want_loss.item<double>();
  double worst = 0;
  for (int r = 0; r < T; ++r) {
    EXPECT_EQ(errors[r], "") << "rank " << r;
    if (!errors[r].empty()) return 1;
    worst = std::max(worst, std::abs(losses[r] - ref) / std::abs(ref));
    if (!split_dropout) continue;  // the gradients differ with the losses
    EXPECT_EQ(moe[r].defined(), want_moe.defined());
    if (want_moe.defined()) {
      // Every rank sees one process's loads (all tokens), aux and z losses.
      EXPECT_TRUE(torch::allclose(moe[r], want_moe, 1e-6, 1e-7)) << moe[r] << want_moe;
    }
    for (const auto& [name, g] : grads[r]) {
      const auto& s = slices[r].at(name);
      const auto want = tp_test_piece(want_grad.at(name), s);
      EXPECT_EQ(g.sizes(), want.sizes()) << name;
      if (g.sizes() != want.sizes()) return 1;
      const double scale = std::max(want.abs().max().item<double>(), 1e-12);
      // nanochat's scalars (resid / x0 / backout / smear lambdas): each gradient is a sum over
      // every position and channel that mostly cancels (x0_lambdas' is ~1e-5 of its terms), so
      // fp32 rounding in the split's order moves it by 1.5e-4 of its largest on this batch and
      // by up to 2e-3 on others (7e-5 even with the model in float64: the vocabulary-parallel
      // loss stays fp32). 1e-2 holds that on any CPU; a missing sum over the ranks or a lost
      // halo gradient moves it by O(1).
      const bool summed_scalar = name.rfind("nanochat.", 0) == 0 && g.dim() == 1;
      EXPECT_LE((g - want).abs().max().item<double>() / scale, summed_scalar ? 1e-2 : 1e-5)
          << "rank " << r << " " << name;
      EXPECT_TRUE(torch::equal(gathered[r].at(name), want_param.at(name))) << name;
      EXPECT_TRUE(torch::equal(released[r].at(name), tp_test_piece(want_param.at(name), s)))
          << name;
    }
  }
  return worst;
}

TEST(TensorParallelPlanTest, Gpt2BlocksWithTiedHeadAndRecomputeEqualOneProcess) {
  auto cfg = model::tiny_gpt_config(32, 64, 16);  // tied head, learned positions, biases
  expect_tp_matches_one_process(cfg, /*recompute=*/true);
}

TEST(TensorParallelPlanTest, DropoutDropsWhatOneProcessDropsAndEqualsIt) {
  auto cfg = model::tiny_gpt_config(32, 64, 16);  // embedding, residual and attention dropout
  cfg.dropout = 0.2;
  expect_tp_matches_one_process(cfg, /*recompute=*/true);  // the replay draws the same masks
  // The check can fail: ranks drawing their own parts' masks from the seed differ.
  EXPECT_GT(tp_test_run(cfg, /*recompute=*/false, /*split_dropout=*/false), 1e-4);
}

TEST(TensorParallelPlanTest, GroupedQueryQwen3BlocksWithUntiedSoftCappedHeadEqualOneProcess) {
  auto cfg = model::with_llama_family(model::tiny_gpt_config(32, 64, 16), model::Arch::kQwen3);
  cfg.n_head = 4;
  cfg.n_kv_head = 2;
  cfg.tie_embeddings = false;
  cfg.logit_softcap = 15;
  expect_tp_matches_one_process(cfg, /*recompute=*/false);
  // q, k and v rows of c_attn: this rank's heads of each (head_dim 8: 2 of 4 q heads, 1 of 2 kv).
  const auto s = tensor_parallel_slice(cfg, "transformer.h.0.attn.c_attn.weight", {64, 32}, 1, 2);
  using Ranges = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(s.dim, 0);
  EXPECT_EQ(s.ranges, (Ranges{{16, 32}, {40, 48}, {56, 64}}));
  const auto proj =
      tensor_parallel_slice(cfg, "transformer.h.1.mlp.c_proj.weight", {32, 128}, 0, 2);
  EXPECT_EQ(proj.dim, 1);
  EXPECT_EQ(proj.ranges, (Ranges{{0, 64}}));
  EXPECT_FALSE(tensor_parallel_slice(cfg, "transformer.ln_f.weight", {32}, 0, 2).sharded());
}

// With every fused kernel (train.fused_kernels=on: their CPU references here, the same math a
// GPU's `auto` runs since all are proven) on both sides: the kernels take this rank's local
// shapes (its heads of the packed q/k/v, its halves of the SwiGLU rows, the whole width of its
// sequence shard in add_norm) and the split still equals one process.
TEST(TensorParallelPlanTest, FusedKernelsOnTheSplitEqualOneProcessWithThem) {
  testing::KernelModeScope on(kernels::FusedKernelMode::kOn);
  expect_tp_matches_one_process(model::tiny_gpt_config(32, 64, 16), /*recompute=*/true);
  auto qwen = model::with_llama_family(model::tiny_gpt_config(32, 64, 16), model::Arch::kQwen3);
  qwen.n_head = 4;
  qwen.n_kv_head = 2;
  qwen.tie_embeddings = false;
  expect_tp_matches_one_process(qwen, /*recompute=*/false);
}

// MoE layers under TP (plan (a): router, experts and shared experts replicated, each rank
// routing its sequence shard): a dense first block and an MoE second one (4 experts, top-2, a
// shared expert, balancing and z losses weighted enough to steer the router's gradient), softmax
// gate with blocks recomputed, then a sigmoid gate with renormalised weights and a balancing
// bias, then with a capacity that drops (each rank keeps its part of one process's plan). Loss,
// per-layer loads, dropped count, aux and z equal one process on every rank; every replicated
// expert's gradient is one process's. The slices keep the MoE parameters whole.
TEST(TensorParallelPlanTest, MoeLayersReplicatedOverTheGroupEqualOneProcess) {
  auto cfg = model::with_llama_family(model::tiny_moe_config(model::MlpKind::kSwiGlu, 4, 2),
                                      model::Arch::kQwen3Moe);
  cfg.moe.dense_layers = {0};
  cfg.moe.shared_experts = 1;
  cfg.moe.aux_loss_coef = 0.5;
  cfg.moe.z_loss_coef = 0.05;
  expect_tp_matches_one_process(cfg, /*recompute=*/true);
  cfg.moe.gate = model::MoeGate::kSigmoid;
  cfg.moe.renormalize = true;
  cfg.moe.bias_update_rate = 0.01;
  expect_tp_matches_one_process(cfg, /*recompute=*/false);
  // A capacity tight enough to drop: each rank keeps what one process keeps of its tokens (the
  // stats compared include the dropped count).
  cfg.moe.capacity_factor = 0.75;
  expect_tp_matches_one_process(cfg, /*recompute=*/true);
  {
    torch::manual_seed(3);
    model::Gpt m(cfg);
    const auto ids = torch::randint(cfg.vocab_size, {3, 16}, torch::kLong);
    EXPECT_GT(m->loss_terms(ids, ids).moe_stats.at(0).dropped.item<double>(), 0.0);
  }
  for (const char* name :
       {"transformer.h.1.mlp.router.weight", "transformer.h.1.mlp.experts.c_fc.weight",
        "transformer.h.1.mlp.shared.c_fc.weight"}) {
    EXPECT_FALSE(tensor_parallel_slice(cfg, name, {4, 48, 16}, 0, 2).sharded()) << name;
  }
  EXPECT_TRUE(
      tensor_parallel_slice(cfg, "transformer.h.0.mlp.c_fc.weight", {128, 16}, 0, 2).sharded());
}

// nanochat's newer parts all on (parallel/tp_nanochat.h): value embeddings split by kv-head
// columns with their gates column-parallel, smear across the sequence shards' boundary (its
// lambda non-zero, so the halo carries values forward and gradients back), backout, resid / x0
// lambdas and embed_norm on the shards, weightless norms, relu², QK-norm x 1.2, blocks recomputed
// (those without a value embedding).
TEST(TensorParallelPlanTest, NanochatPartsEqualOneProcess) {
  auto cfg = model::with_llama_family(model::tiny_gpt_config(32, 64, 16), model::Arch::kNanochat);
  cfg.n_layer = 3;  // value embeddings in layers 0 and 2, backout after layer 1
  cfg.n_head = 4;
  cfg.n_kv_head = 2;
  cfg.mlp = model::MlpKind::kRelu2;
  cfg.qk_norm = true;
  cfg.qk_scale = 1.2;
  cfg.norm_weight = false;
  cfg.tie_embeddings = false;
  cfg.logit_softcap = 15;
  cfg.embed_norm = cfg.x0_lambdas = cfg.value_embeds = cfg.smear = cfg.backout = true;
  expect_tp_matches_one_process(cfg, /*recompute=*/true, [](model::GptImpl& m) {
    torch::NoGradGuard no_grad;
    m.nanochat->smear_lambda.fill_(0.3);
  });
  // Rank 1 of 2 holds kv head 1 (head_dim 8): columns 8..16 of a table, row 1 of a gate.
  using Ranges = std::vector<std::pair<int64_t, int64_t>>;
  const auto table = tensor_parallel_slice(cfg, "nanochat.value_embeds.2.weight", {64, 16}, 1, 2);
  EXPECT_EQ(table.dim, 1);
  EXPECT_EQ(table.ranges, (Ranges{{8, 16}}));
  const auto gate =
      tensor_parallel_slice(cfg, "transformer.h.0.attn.ve_gate.weight", {2, 12}, 1, 2);
  EXPECT_EQ(gate.dim, 0);
  EXPECT_EQ(gate.ranges, (Ranges{{1, 2}}));
  EXPECT_FALSE(tensor_parallel_slice(cfg, "nanochat.smear_gate.weight", {1, 24}, 1, 2).sharded());
}

TEST(TensorParallelPlanTest, WhatDoesNotSplitIsRefusedNamingTheKey) {
  auto cfg = model::tiny_gpt_config(32, 64, 16);
  cfg.n_head = 4;
  cfg.n_kv_head = 1;
  auto refused = [&](const model::GptConfig& c, int64_t seq_len, const std::string& key) {
    try {
      check_tensor_parallel(c, seq_len, 2);
      ADD_FAILURE() << "not refused: " << key;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  };
  refused(cfg, 16, "'model.n_kv_head' = 1");
  cfg.n_kv_head = 2;
  check_tensor_parallel(cfg, 16, 2);
  refused(cfg, 15, "'data.seq_len'");
  auto odd_vocab = cfg;
  odd_vocab.vocab_size = 65;
  refused(odd_vocab, 16, "'model.vocab_size'");
}

}  // namespace
}  // namespace lmtrain::parallel
