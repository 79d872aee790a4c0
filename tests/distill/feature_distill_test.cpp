// Feature and MoE-output distillation (distill/feature_distill.h): layers paired by relative
// depth, bad layer lists named; the activations a forward hands out are the blocks' outputs and
// the MoE layers' outputs, also through activation checkpointing; the objective's loss is the
// logit loss plus the weighted MSE through the learned projections, gradients included.
#include "distill/feature_distill.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/error.h"
#include "distill/distill_objective.h"
#include "model/gpt.h"
#include "model_fixtures.h"

namespace lmtrain::train {
namespace {

std::string pairing_error(const std::string& text, int64_t ls, int64_t lt) {
  try {
    parse_layer_pairs(text, ls, lt, "distill.feature_layers");
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(FeatureDistill, LayersPairByRelativeDepthAndBadListsAreNamed) {
  EXPECT_EQ(matching_layer(0, 4, 8), 1);
  EXPECT_EQ(matching_layer(3, 4, 8), 7);  // last meets last
  EXPECT_EQ(matching_layer(1, 2, 2), 1);
  EXPECT_EQ(matching_layer(0, 2, 6), 2);
  EXPECT_EQ(matching_layer(2, 3, 2), 1);
  auto pairs = parse_layer_pairs("1, 3", 4, 8, "k");
  ASSERT_EQ(pairs.size(), 2u);
  EXPECT_EQ(pairs[0].student, 1);
  EXPECT_EQ(pairs[0].teacher, 3);
  EXPECT_EQ(pairs[1].teacher, 7);
  pairs = parse_layer_pairs("0:5,2", 4, 8, "k");
  EXPECT_EQ(pairs[0].teacher, 5);
  EXPECT_EQ(pairs[1].student, 2);
  EXPECT_EQ(pairs[1].teacher, 5);
  pairs = parse_layer_pairs("all", 2, 4, "k");
  ASSERT_EQ(pairs.size(), 2u);
  EXPECT_EQ(pairs[0].teacher, 1);
  EXPECT_EQ(pairs[1].teacher, 3);
  EXPECT_TRUE(parse_layer_pairs("", 2, 4, "k").empty());

  const std::string key = "config key 'distill.feature_layers' = ";
  EXPECT_NE(pairing_error("x", 4, 8).find(key + "'x': 'x' is not a layer index"),
            std::string::npos);
  EXPECT_NE(pairing_error("-1", 4, 8).find("'-1' is not a layer index"), std::string::npos);
  EXPECT_NE(pairing_error("4", 4, 8).find("layer 4 is outside the student's 4 layers"),
            std::string::npos);
  EXPECT_NE(pairing_error("1:8", 4, 8).find("layer 8 is outside the teacher's 8 layers"),
            std::string::npos);
  EXPECT_NE(pairing_error("1:2:3", 4, 8).find("'1:2:3' has more than one ':'"), std::string::npos);
  EXPECT_NE(pairing_error("1,1:4", 4, 8).find("student layer 1 is listed twice"),
            std::string::npos);
  EXPECT_NE(pairing_error("1,", 4, 8).find("'' is not a layer index"), std::string::npos);
}

// A 3-layer MoE model whose middle block is dense.
model::GptConfig moe_student(int64_t width) {
  auto c = model::tiny_moe_config(model::MlpKind::kSwiGlu, 4, 2);
  c.n_layer = 3;
  c.n_embd = width;
  c.moe.dense_layers = {1};
  return c;
}

TEST(FeatureDistill, TapsAreTheBlockAndMoeOutputsAlsoThroughCheckpointing) {
  torch::manual_seed(3);
  model::Gpt m(moe_student(16));
  m->train();
  auto ids = torch::randint(64, {2, 8}, torch::kLong);
  // The blocks by hand: x -> block(x), and each MoE layer's feed-forward output.
  std::vector<torch::Tensor> outs, moe_out;
  {
    torch::NoGradGuard no_grad;
    auto x = m->transformer->wte(ids);
    if (m->transformer->wpe) x = x + m->transformer->wpe(torch::arange(8));
    for (auto& block : m->transformer->blocks) {
      if (block->is_moe()) {
        auto h = x + block->attn(block->ln_1(x));
        moe_out.push_back(block->mlp->run(block->ln_2(h)).y);
      }
      x = block->forward(x);
      outs.push_back(x);
    }
  }
  model::HiddenTaps taps;
  taps.block_layers = {2, 0};
  taps.moe_outputs = true;
  auto final = m->final_hidden(ids, taps);
  ASSERT_EQ(taps.blocks.size(), 2u);
  EXPECT_TRUE(torch::allclose(taps.blocks[0], outs[2], 1e-6, 1e-6));
  EXPECT_TRUE(torch::allclose(taps.blocks[1], outs[0], 1e-6, 1e-6));
  ASSERT_EQ(taps.moe_out.size(), 2u);  // layers 0 and 2
  EXPECT_TRUE(torch::allclose(taps.moe_out[0], moe_out[0], 1e-6, 1e-6));
  EXPECT_TRUE(torch::allclose(taps.moe_out[1], moe_out[1], 1e-6, 1e-6));
  EXPECT_EQ(taps.moe.size(), 2u);
  EXPECT_TRUE(torch::equal(final, m->final_hidden(ids)));

  // Gradients through the taps equal with every block recomputed in backward.
  auto grads = [&](bool checkpoint) {
    m->set_checkpointing(model::CheckpointPolicy{checkpoint ? 1 : 0});
    m->zero_grad();
    model::HiddenTaps t;
    t.block_layers = {1};
    t.moe_outputs = true;
    auto h = m->final_hidden(ids, t);
    (h.sum() + t.blocks[0].square().sum() + t.moe_out[1].square().sum()).backward();
    std::vector<torch::Tensor> g;
    for (const auto& p : m->parameters())
      g.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
    return g;
  };
  const auto plain = grads(false), recomputed = grads(true);
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_TRUE(torch::allclose(plain[i], recomputed[i], 1e-5, 1e-6)) << "parameter " << i;
  }
}

// The objective's loss against the formula: the logit loss (the same objective without feature
// terms) plus feature_weight * mean over pairs of mean over valid rows and channels of
// (P h_s - h_t)^2, and expert_weight * the same over MoE outputs.
TEST(FeatureDistill, LossIsTheLogitLossPlusTheWeightedProjectedMse) {
  torch::manual_seed(5);
  model::Gpt student(moe_student(16));
  model::Gpt teacher(moe_student(32));
  student->train();
  model::DistillLossSpec spec;
  spec.temperature = 2;
  spec.alpha = 0.6;
  spec.chunk_rows = 7;
  FeatureDistillSpec f;
  f.student_width = 16;
  f.teacher_width = 32;
  f.features = parse_layer_pairs("0,2:1", 3, 3, "k");
  f.feature_weight = 0.5;
  f.experts = {{0, 0}, {1, 1}};
  f.expert_weight = 2.0;
  DistillObjective with(teacher, spec, true, f, 11);
  DistillObjective without(teacher, spec, true);
  ASSERT_EQ(with.metric_names(), (std::vector<std::string>{"kd", "ce", "feature", "expert"}));
  ASSERT_NE(with.trained_module(), nullptr);
  EXPECT_EQ(without.trained_module(), nullptr);
  auto params = with.projections().named_parameters();
  ASSERT_EQ(params.size(), 4u);  // feature_0, feature_1, expert_0, expert_1: (32, 16)
  EXPECT_EQ(params["feature_1"].sizes(), (std::vector<int64_t>{32, 16}));

  auto ids = torch::randint(64, {3, 8}, torch::kLong);
  auto targets = torch::randint(64, {3, 8}, torch::kLong);
  targets[1].narrow(0, 3, 5).fill_(model::kIgnoreIndex);
  auto batch = Batch::with_mask(ids, targets);
  auto out = with.compute(*student, batch);
  auto base = without.compute(*student, batch);

  auto keep = model::valid_target_rows(targets.reshape({-1}));
  auto rows = [&](const torch::Tensor& a) {
    return a.reshape({-1, a.size(-1)}).index_select(0, keep);
  };
  model::HiddenTaps ts, tt;
  ts.block_layers = {0, 2};
  tt.block_layers = {0, 1};
  ts.moe_outputs = tt.moe_outputs = true;
  student->final_hidden(ids, ts);
  {
    torch::NoGradGuard no_grad;
    teacher->eval();
    teacher->final_hidden(ids, tt);
  }
  auto mse = [&](const torch::Tensor& s, const torch::Tensor& w, const torch::Tensor& t) {
    return (torch::linear(rows(s), w) - rows(t)).square().mean();
  };
  auto feature = (mse(ts.blocks[0], params["feature_0"], tt.blocks[0]) +
                  mse(ts.blocks[1], params["feature_1"], tt.blocks[1])) /
                 2;
  auto expert = (mse(ts.moe_out[0], params["expert_0"], tt.moe_out[0]) +
                 mse(ts.moe_out[1], params["expert_1"], tt.moe_out[1])) /
                2;
  auto expected = base.loss + 0.5 * feature + 2.0 * expert;
  EXPECT_NEAR(out.loss.item<double>(), expected.item<double>(), 1e-5);
  EXPECT_NEAR(out.metrics[2].item<double>(), feature.item<double>(), 1e-6);
  EXPECT_NEAR(out.metrics[3].item<double>(), expert.item<double>(), 1e-8);
  EXPECT_GT(expert.item<double>(), 0);
  // Gradients: the projections' and the student's, against autograd of the formula.
  std::vector<torch::Tensor> wrt;
  for (const auto& p : params) wrt.push_back(p.value());
  for (const auto& p : student->parameters()) wrt.push_back(p);
  auto g_out = torch::autograd::grad({out.loss}, wrt, {}, false, false, true);
  auto g_ref = torch::autograd::grad({expected}, wrt, {}, false, false, true);
  for (size_t i = 0; i < wrt.size(); ++i) {
    if (!g_ref[i].defined()) {
      EXPECT_FALSE(g_out[i].defined() && g_out[i].abs().max().item<double>() > 0) << i;
      continue;
    }
    ASSERT_TRUE(g_out[i].defined()) << "tensor " << i;
    EXPECT_TRUE(torch::allclose(g_out[i], g_ref[i], 1e-4, 1e-7)) << "tensor " << i;
  }
}

TEST(FeatureDistill, EqualWidthsNeedNoProjectionAndExpertTermsNeedMoeModels) {
  DistillOptions distill;
  distill.feature_layers = "1";
  distill.feature_weight = 1;
  auto dense = moe_student(16);
  dense.moe.num_experts = 0;
  auto f = FeatureDistillSpec::make(distill, dense, dense);
  ASSERT_EQ(f.features.size(), 1u);
  EXPECT_TRUE(f.experts.empty());
  FeatureProjections same(f, 1);
  EXPECT_TRUE(same->parameters().empty());
  auto x = torch::randn({4, 16});
  EXPECT_TRUE(torch::equal(same->feature(0, x), x));
  distill.feature_weight = 0;  // weight 0: the layers are not used
  EXPECT_TRUE(FeatureDistillSpec::make(distill, dense, dense).features.empty());
  distill.expert_weight = 1;
  EXPECT_THROW(FeatureDistillSpec::make(distill, moe_student(16), dense), UsageError);
  f = FeatureDistillSpec::make(distill, moe_student(16), moe_student(32));
  ASSERT_EQ(f.experts.size(), 2u);  // the student's 2 MoE layers
  EXPECT_EQ(f.experts[1].teacher, 1);
}

}  // namespace
}  // namespace lmtrain::train
