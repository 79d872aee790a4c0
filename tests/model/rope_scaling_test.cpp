// Scaled RoPE against transformers itself: for each rope_type lmtrain implements, the
// rope_parameters go through the import mapping (interop/hf_rope_window.h) and the config
// reader into RopeParams, and model::rope_frequencies must give exactly the inverse
// frequencies and attention factor of transformers' ROPE_INIT_FUNCTIONS (the venv's, through
// tests/fixtures/hf_check.py rope-tables).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "core/config.h"
#include "interop/hf_rope_window.h"
#include "model/rope.h"
#include "options/read_model.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

struct RopeCase {
  std::string name;
  nlohmann::json rope;  // rope_parameters
  int64_t head_dim, max_pos;
  int64_t seq_len;  // > 0: a forward reaching this length (dynamic grows past max_pos)
};

// The RopeParams `lmtrain import hf` makes of these rope_parameters.
model::RopeParams imported(const RopeCase& c) {
  const nlohmann::json j = {{"rope_parameters", c.rope}, {"max_position_embeddings", c.max_pos}};
  auto cfg = core::Config::defaults();
  cfg.set("model.pos", "rope", "test");
  cfg.set("model.block_size", std::to_string(c.max_pos), "test");
  cfg.set("data.seq_len", std::to_string(c.max_pos), "test");
  for (const auto& [key, value] : model::hf::rope_overrides(j, c.max_pos))
    cfg.set(key, value, "test");
  return options::read_gpt_config(cfg, options::kTokenizerLater).rope_params();
}

TEST(RopeScaling, TablesMatchTransformersRopeInitFunctions) {
  const nlohmann::json llama3 = {
      {"rope_type", "llama3"},   {"rope_theta", 500000.0},
      {"factor", 8.0},           {"low_freq_factor", 1.0},
      {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  const std::vector<RopeCase> cases = {
      {"default", {{"rope_type", "default"}, {"rope_theta", 10000.0}}, 16, 64, 0},
      {"linear", {{"rope_type", "linear"}, {"rope_theta", 10000.0}, {"factor", 2.0}}, 16, 64, 0},
      {"dynamic within the context",
       {{"rope_type", "dynamic"}, {"rope_theta", 10000.0}, {"factor", 2.0}},
       16,
       64,
       0},
      {"dynamic past the context",
       {{"rope_type", "dynamic"}, {"rope_theta", 10000.0}, {"factor", 2.0}},
       16,
       32,
       50},
      {"dynamic far past, head_dim 64",
       {{"rope_type", "dynamic"}, {"rope_theta", 1e6}, {"factor", 4.0}},
       64,
       128,
       1000},
      {"llama3 (Llama 3.1 8B's)", llama3, 128, 131072, 0},
      {"llama3 small",
       {{"rope_type", "llama3"},
        {"rope_theta", 500.0},
        {"factor", 8.0},
        {"low_freq_factor", 1.0},
        {"high_freq_factor", 4.0},
        {"original_max_position_embeddings", 32}},
       16,
       64,
       0},
      {"yarn (Qwen3's)",
       {{"rope_type", "yarn"},
        {"rope_theta", 1e6},
        {"factor", 4.0},
        {"original_max_position_embeddings", 32768}},
       128,
       131072,
       0},
      {"yarn small",
       {{"rope_type", "yarn"},
        {"rope_theta", 10000.0},
        {"factor", 4.0},
        {"original_max_position_embeddings", 16}},
       16,
       64,
       0},
      {"yarn mscale, betas, untruncated",
       {{"rope_type", "yarn"},
        {"rope_theta", 10000.0},
        {"factor", 40.0},
        {"mscale", 1.0},
        {"mscale_all_dim", 0.707},
        {"beta_fast", 16},
        {"beta_slow", 2},
        {"truncate", false},
        {"original_max_position_embeddings", 64}},
       64,
       4096,
       0},
      {"yarn attention_factor, no factor",
       {{"rope_type", "yarn"},
        {"rope_theta", 10000.0},
        {"attention_factor", 1.25},
        {"factor", nullptr},
        {"original_max_position_embeddings", 16}},
       32,
       64,
       0},
  };
  // One Python process for every case (starting transformers costs seconds per call).
  nlohmann::json request = nlohmann::json::array();
  for (const auto& c : cases) {
    request.push_back({{"rope", c.rope},
                       {"head_dim", c.head_dim},
                       {"max_pos", c.max_pos},
                       {"seq_len", c.seq_len}});
  }
  TempDir tmp("lmtrain_rope_tables");
  const std::string cases_file = tmp.file("cases.json");
  write_text(cases_file, request.dump());
  auto r = run_hf_check("rope-tables " + cases_file);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto tables = check_result(r)["tables"];
  ASSERT_EQ(tables.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    const auto& theirs = tables[i];
    SCOPED_TRACE(c.name);
    const auto want = torch::tensor(theirs["inv_freq"].get<std::vector<float>>());
    const auto ours = model::rope_frequencies(imported(c), c.head_dim,
                                              c.seq_len > 0 ? c.seq_len : c.max_pos, c10::kCPU);
    ASSERT_EQ(ours.inv_freq.sizes(), want.sizes());
    const double worst = (ours.inv_freq - want).abs().max().item<double>();
    std::cout << c.name << ": max |inv_freq diff| = " << worst << ", attention factor "
              << ours.attention_scaling << " (transformers "
              << theirs["attention_factor"].get<double>() << ")\n";
    // Bitwise: the same fp32 ops in the same order.
    EXPECT_EQ(worst, 0.0);
    EXPECT_DOUBLE_EQ(ours.attention_scaling, theirs["attention_factor"].get<double>());
  }
}

// The scaling reaches the rotation: apply_rope of a scaled RopeParams rotates by its
// frequencies (cos and sin times the attention factor), at contiguous and explicit positions.
TEST(RopeScaling, ApplyRopeUsesTheScaledTablesAndAttentionFactor) {
  model::RopeParams yarn(10000.0);
  yarn.scaling.type = model::RopeType::kYarn;
  yarn.scaling.factor = 4;
  yarn.scaling.original_max = 16;
  const auto f = model::rope_frequencies(yarn, 8, 40, c10::kCPU);
  EXPECT_NEAR(f.attention_scaling, 0.1 * std::log(4.0) + 1, 1e-15);
  torch::manual_seed(0);
  auto x = torch::randn({1, 2, 40, 8});
  const int64_t start = 3;
  auto pos = torch::arange(start, start + 40, torch::kFloat);
  auto angles = pos.unsqueeze(1) * f.inv_freq;  // (T, D/2)
  auto emb = torch::cat({angles, angles}, -1);
  auto x1 = x.narrow(-1, 0, 4), x2 = x.narrow(-1, 4, 4);
  auto want = (x * emb.cos() + torch::cat({-x2, x1}, -1) * emb.sin()) * f.attention_scaling;
  EXPECT_LE((model::apply_rope(x, start, yarn) - want).abs().max().item<double>(), 1e-6);
  EXPECT_TRUE(torch::equal(model::apply_rope(x, start, yarn),
                           model::apply_rope_at(x, torch::arange(start, start + 40), yarn)));
  // Plain RoPE differs: the scaling is not ignored.
  EXPECT_GT((model::apply_rope(x, start, 10000.0) - want).abs().max().item<double>(), 1e-2);
}

// Dynamic scaling grows the base per forward from the positions it reaches, as transformers'
// dynamic_rope_update: a 50-token forward past original_max 32 rotates by the frequencies of
// seq_len 50 (the last token decoded alone at position 49 too, as HF's cached generation),
// one within 32 by the plain ones.
TEST(RopeScaling, DynamicFrequenciesFollowTheLengthAForwardReaches) {
  model::RopeParams dyn(10000.0);
  dyn.scaling.type = model::RopeType::kDynamic;
  dyn.scaling.factor = 2;
  dyn.scaling.original_max = 32;
  torch::manual_seed(0);
  auto x = torch::randn({1, 1, 50, 16});
  auto rotate = [](const at::Tensor& x, const at::Tensor& pos, const at::Tensor& inv_freq) {
    auto angles = pos.to(torch::kFloat).unsqueeze(1) * inv_freq;
    auto emb = torch::cat({angles, angles}, -1);
    auto x1 = x.narrow(-1, 0, 8), x2 = x.narrow(-1, 8, 8);
    return x * emb.cos() + torch::cat({-x2, x1}, -1) * emb.sin();
  };
  const auto grown = model::rope_frequencies(dyn, 16, 50, c10::kCPU).inv_freq;
  const auto plain = model::rope_frequencies(10000.0, 16, 50, c10::kCPU).inv_freq;
  EXPECT_GT((grown - plain).abs().max().item<double>(), 1e-4);
  EXPECT_TRUE(torch::equal(model::apply_rope(x, 0, dyn), rotate(x, torch::arange(50), grown)));
  auto last = x.narrow(2, 49, 1);
  EXPECT_TRUE(
      torch::equal(model::apply_rope(last, 49, dyn), rotate(last, torch::arange(49, 50), grown)));
  EXPECT_TRUE(torch::equal(model::apply_rope_at(last, torch::arange(49, 50), dyn),
                           rotate(last, torch::arange(49, 50), grown)));
  auto early = x.narrow(2, 0, 20);
  EXPECT_TRUE(torch::equal(model::apply_rope(early, 0, dyn), model::apply_rope(early, 0, 10000.0)));
}

}  // namespace
}  // namespace lmtrain::testing
