// Muon against reference values from Keller Jordan's formulation run by Debian's python3-torch
// (tests/fixtures/make_muon_reference.py -> muon_reference.json, committed).
#include "optim/muon.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace lmtrain::optim {
namespace {

nlohmann::json reference() {
  return nlohmann::json::parse(
      testing::read_text(testing::source_dir() + "/tests/fixtures/muon_reference.json"));
}

at::Tensor tensor(const nlohmann::json& values, std::vector<int64_t> shape) {
  return torch::tensor(values.get<std::vector<float>>()).reshape(shape);
}

TEST(Muon, NewtonSchulzMatchesReferenceForWideAndTallMatrices) {
  const auto ref = reference();
  const auto shape = ref["ns_shape"].get<std::vector<int64_t>>();
  const auto in = tensor(ref["ns_input"], shape);
  EXPECT_TRUE(torch::allclose(newton_schulz5(in), tensor(ref["ns_output"], shape), 1e-5, 1e-5));
  const auto tall = in.t().contiguous();
  EXPECT_TRUE(torch::allclose(newton_schulz5(tall),
                              tensor(ref["ns_output_tall"], {shape[1], shape[0]}), 1e-5, 1e-5));
  // The result is close to orthogonal: singular values near 1 (the quintic's fixed band).
  const auto s = std::get<1>(torch::svd(newton_schulz5(in)));
  EXPECT_GT(s.min().item<double>(), 0.5);
  EXPECT_LT(s.max().item<double>(), 1.3);
}

struct Matrices : torch::nn::Module {
  explicit Matrices(const nlohmann::json& ref) {
    const auto shapes = ref["shapes"].get<std::vector<std::vector<int64_t>>>();
    for (size_t i = 0; i < shapes.size(); ++i) {
      register_parameter("w" + std::to_string(i), tensor(ref["init"][i], shapes[i]));
    }
  }
};

TEST(Muon, ThreeStepsWithMomentumWarmupMatchReference) {
  const auto ref = reference();
  const auto shapes = ref["shapes"].get<std::vector<std::vector<int64_t>>>();
  Matrices m(ref);
  FlatParams flat(m, [](const std::string&) { return true; });
  auto group = dist::make_single_rank_group();
  MuonOptions mo;
  mo.lr = ref["lr"].get<double>();
  mo.momentum = ref["momentum"].get<double>();
  mo.momentum_start = ref["momentum_start"].get<double>();
  mo.momentum_warmup = ref["momentum_warmup"].get<int64_t>();
  Muon opt(flat, AdamWOptions{}, mo, mo.lr, *group,
           [](const std::string&, const std::vector<int64_t>&) { return true; });
  auto named = m.named_parameters();
  for (size_t t = 0; t < ref["grads"].size(); ++t) {
    for (size_t i = 0; i < shapes.size(); ++i) {
      flat.view(flat.grads(), flat.segment("w" + std::to_string(i)))
          .copy_(tensor(ref["grads"][t][i], shapes[i]));
    }
    opt.step(mo.lr);
  }
  for (size_t i = 0; i < shapes.size(); ++i) {
    const auto got = named["w" + std::to_string(i)];
    const auto want = tensor(ref["final"][i], shapes[i]);
    EXPECT_LE((got - want).abs().max().item<double>(), 1e-5) << "matrix " << i;
  }
  EXPECT_EQ(opt.step_count(), 3);
  EXPECT_EQ(opt.owner("w0"), 0);
}

TEST(Muon, MomentumWarmsUpLinearly) {
  MuonOptions o;
  o.momentum_start = 0.85;
  o.momentum = 0.95;
  o.momentum_warmup = 300;
  EXPECT_DOUBLE_EQ(o.momentum_at(0), 0.85);
  EXPECT_NEAR(o.momentum_at(150), 0.90, 1e-12);
  EXPECT_DOUBLE_EQ(o.momentum_at(300), 0.95);
  EXPECT_DOUBLE_EQ(o.momentum_at(10000), 0.95);
}

}  // namespace
}  // namespace lmtrain::optim

namespace lmtrain::optim {
namespace {

struct Grouped : torch::nn::Module {
  Grouped() {
    register_parameter("wte", torch::zeros({4, 3}));
    register_parameter("lm_head", torch::zeros({4, 3}));
    register_parameter("bias", torch::zeros({3}));
  }
};

// Adam's first step moves every element by lr (|m̂ / sqrt(v̂)| = 1): each AdamW group's step
// shows its own learning rate. The groups come from the tags, whatever the names.
TEST(Muon, AdamWGroupsUseTheirOwnLearningRates) {
  Grouped m;
  model::ParamTags tags;
  for (const auto& [name, group] :
       {std::pair{"wte", model::LrGroup::kEmbedding}, std::pair{"lm_head", model::LrGroup::kHead},
        std::pair{"bias", model::LrGroup::kBase}}) {
    tags[name].decay = false;
    tags[name].lr_group = group;
  }
  FlatParams flat(m, tags);
  auto group = dist::make_single_rank_group();
  MuonOptions mo;
  mo.embedding_lr = 0.3;
  mo.head_lr = 0.2;
  Muon opt(flat, AdamWOptions{}, mo, /*base_lr=*/0.1, *group,
           [](const std::string&, const std::vector<int64_t>&) { return false; });
  flat.grads().fill_(1.0);
  opt.step(0.05);  // half way down the schedule: every group at half its peak
  auto named = m.named_parameters();
  EXPECT_NEAR(named["wte"].abs().max().item<double>(), 0.15, 1e-6);
  EXPECT_NEAR(named["lm_head"].abs().max().item<double>(), 0.10, 1e-6);
  EXPECT_NEAR(named["bias"].abs().max().item<double>(), 0.05, 1e-6);
}

}  // namespace
}  // namespace lmtrain::optim
