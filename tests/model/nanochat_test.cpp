// nanochat's current architecture (issue 40) against bench/reference/nanochat_gpt.py, the fp32
// PyTorch reference written from nanochat/gpt.py: lmtrain's weights are written under nanochat's
// names, the reference runs forward and backward on the same batch, and the logits and every
// gradient agree within 1e-5. Also the window pattern's mapping onto model.windows.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/error.h"
#include "core/safetensors.h"
#include "model/gpt.h"
#include "options/read_model.h"
#include "test_util.h"

namespace lmtrain::model {
namespace {

struct NanochatCase {
  std::string pattern;
  bool value_embeds;
  int64_t n_kv_head;
};

void PrintTo(const NanochatCase& c, std::ostream* os) {
  *os << c.pattern << (c.value_embeds ? " with" : " without") << " value embeddings, "
      << c.n_kv_head << " kv heads";
}

// A small nanochat through the config keys the preset sets. seq_len 256: the short window is
// 128 (nanochat's smallest), so S layers see fewer keys than the sequence holds.
core::Config nanochat_config(const NanochatCase& c) {
  auto cfg = core::Config::defaults();
  cfg.merge_yaml_file(testing::source_dir() + "/configs/nanochat-d12.yaml");
  const std::vector<std::pair<std::string, std::string>> keys = {
      {"data.seq_len", "256"},
      {"model.depth", "0"},
      {"model.n_layer", "4"},
      {"model.n_head", "4"},
      {"model.n_kv_head", std::to_string(c.n_kv_head)},
      {"model.n_embd", "64"},
      {"model.head_dim", "16"},
      {"model.vocab_size", "96"},
      {"model.block_size", "256"},
      {"model.window_pattern", c.pattern},
      {"model.value_embeds", c.value_embeds ? "true" : "false"}};
  for (const auto& [k, v] : keys) cfg.set(k, v, "test");
  return cfg;
}

// Splits c_attn (H + 2K) D rows into nanochat's c_q, c_k, c_v. nanochat rotates by -theta: that
// is lmtrain's +theta rotation on q and k with the second half of each head negated (P R P with
// P = diag(1, -1) per pair; the weightless QK-norm commutes with P). Grads map the same way.
std::vector<std::pair<std::string, torch::Tensor>> split_attn(const std::string& prefix,
                                                              const torch::Tensor& w,
                                                              const GptConfig& c) {
  const int64_t H = c.n_head, K = c.kv_heads(), D = c.head_dim();
  auto flip = [D](torch::Tensor rows, int64_t heads) {  // (heads D, C)
    auto r = rows.clone().view({heads, 2, D / 2, -1});
    r.select(1, 1).neg_();
    return r.view({heads * D, -1});
  };
  return {{prefix + "c_q.weight", flip(w.narrow(0, 0, H * D), H)},
          {prefix + "c_k.weight", flip(w.narrow(0, H * D, K * D), K)},
          {prefix + "c_v.weight", w.narrow(0, (H + K) * D, K * D).clone()}};
}

// lmtrain name -> nanochat's, with c_attn split (each entry: nanochat name, tensor).
core::NamedTensors to_nanochat(const std::vector<std::pair<std::string, torch::Tensor>>& named,
                               const GptConfig& c) {
  core::NamedTensors out;
  for (const auto& [name, t] : named) {
    const std::string attn = ".attn.c_attn.weight";
    if (name.size() > attn.size() &&
        name.compare(name.size() - attn.size(), attn.size(), attn) == 0) {
      for (auto& e : split_attn(name.substr(0, name.size() - attn.size()) + ".attn.", t, c)) {
        out.push_back(e);
      }
    } else if (name.rfind("nanochat.", 0) == 0) {
      out.emplace_back(name.substr(9), t.clone());
    } else {
      out.emplace_back(name, t.clone());
    }
  }
  return out;
}

const std::vector<NanochatCase> kNanochatCases = {
    {"SSSL", true, 4}, {"SSSL", false, 4}, {"L", true, 4}, {"L", false, 4}, {"SSSL", true, 2}};

// One case's side of the comparison: lmtrain's logits and gradients (under nanochat's names)
// and the reference's outputs on the same weights and batch.
struct NanochatRun {
  torch::Tensor logits;
  core::NamedTensors grads;
  std::map<std::string, torch::Tensor> ref;
};

// Every case's model runs here, then one reference process checks them all (starting Python
// and torch costs seconds per call).
class NanochatParity : public ::testing::TestWithParam<NanochatCase> {
 protected:
  static void SetUpTestSuite() {
    runs_ = new std::vector<NanochatRun>();
    testing::TempDir dir("nanochat_parity");
    nlohmann::json cases = nlohmann::json::array();
    for (size_t i = 0; i < kNanochatCases.size(); ++i) {
      const auto& tc = kNanochatCases[i];
      const auto mcfg = options::read_gpt_config(nanochat_config(tc), 0);
      torch::manual_seed(5);
      Gpt model(mcfg);
      {
        torch::NoGradGuard no_grad;  // exercise the smear gate (nanochat starts its lambda at 0)
        model->nanochat->smear_lambda.fill_(0.3);
      }
      const int64_t B = 2, T = 256;
      auto ids = torch::randint(0, mcfg.vocab_size, {B, T}, torch::kLong);
      auto targets = torch::randint(0, mcfg.vocab_size, {B, T}, torch::kLong);
      NanochatRun run;
      run.logits = model->forward(ids).detach();
      model->zero_grad();
      model->loss(ids, targets).backward();
      std::vector<std::pair<std::string, torch::Tensor>> params, grads;
      for (const auto& p : model->named_parameters()) {
        params.emplace_back(p.key(), p.value().detach());
        grads.emplace_back(p.key(), p.value().grad());
      }
      run.grads = to_nanochat(grads, mcfg);
      runs_->push_back(std::move(run));
      const std::string tag = dir.file(std::to_string(i));
      core::write_safetensors(tag + "w.safetensors", to_nanochat(params, mcfg));
      core::write_safetensors(tag + "b.safetensors", {{"idx", ids}, {"targets", targets}});
      nlohmann::json cfg_json = {{"sequence_len", T},
                                 {"vocab_size", mcfg.vocab_size},
                                 {"n_layer", mcfg.n_layer},
                                 {"n_head", mcfg.n_head},
                                 {"n_kv_head", mcfg.kv_heads()},
                                 {"n_embd", mcfg.n_embd},
                                 {"head_dim", mcfg.head_dim()},
                                 {"window_pattern", tc.pattern},
                                 {"value_embeds", tc.value_embeds},
                                 {"smear", true},
                                 {"backout", true}};
      testing::write_text(tag + "cfg.json", cfg_json.dump());
      cases.push_back({{"config", tag + "cfg.json"},
                       {"weights", tag + "w.safetensors"},
                       {"batch", tag + "b.safetensors"},
                       {"out", tag + "out.safetensors"}});
    }
    testing::write_text(dir.file("cases.json"), cases.dump());
    const std::string command = testing::lmtrain_python() + " " + testing::source_dir() +
                                "/bench/reference/nanochat_gpt.py check --cases " +
                                dir.file("cases.json");
    const auto r = testing::run_command(command);
    std::cout << "reference: " << command << "\n";
    ASSERT_EQ(r.exit_code, 0) << r.output;
    for (size_t i = 0; i < cases.size(); ++i) {
      (*runs_)[i].ref = core::read_safetensors(cases[i]["out"].get<std::string>()).tensors;
    }
  }
  static void TearDownTestSuite() { delete runs_, runs_ = nullptr; }
  static std::vector<NanochatRun>* runs_;
};

std::vector<NanochatRun>* NanochatParity::runs_ = nullptr;

TEST_P(NanochatParity, LogitsAndEveryGradientMatchTheReference) {
  const auto& tc = GetParam();
  const auto at = std::find_if(kNanochatCases.begin(), kNanochatCases.end(), [&](const auto& c) {
    return c.pattern == tc.pattern && c.value_embeds == tc.value_embeds &&
           c.n_kv_head == tc.n_kv_head;
  });
  ASSERT_TRUE(runs_ && at != kNanochatCases.end());
  const auto& run = (*runs_)[static_cast<size_t>(at - kNanochatCases.begin())];
  ASSERT_FALSE(run.ref.empty()) << "the reference did not run";
  const auto& ref = run.ref;

  const double logit_diff = (run.logits - ref.at("logits")).abs().max().item<double>();
  EXPECT_LE(logit_diff, 1e-5);
  double worst = 0, worst_rel = 0;
  std::string worst_name;
  int compared = 0;
  for (const auto& [name, g] : run.grads) {
    ASSERT_TRUE(ref.count("grad." + name)) << name << " has no gradient in the reference";
    const auto& r = ref.at("grad." + name);
    const double d = (g - r).abs().max().item<double>();
    EXPECT_LE(d, 1e-5) << name;
    // Relative to the gradient's own scale too (some are ~1e-4 in size; a scalar's, such as
    // backout_lambda's, sums B T C terms that mostly cancel, so fp32 leaves ~2e-4 of it).
    const double rel = d / std::max(r.abs().max().item<double>(), 1e-12);
    EXPECT_LE(rel, 1e-3) << name;
    worst_rel = std::max(worst_rel, rel);
    if (d >= worst) worst = d, worst_name = name;
    ++compared;
  }
  // Every reference parameter is one of ours.
  EXPECT_EQ(compared, static_cast<int>(ref.size()) - 2);
  std::printf(
      "nanochat parity %s%s kv%lld: logits max |diff| %.3g, %d gradients, worst %.3g (%s), worst "
      "relative %.3g\n",
      tc.pattern.c_str(), tc.value_embeds ? " +ve" : "", (long long)tc.n_kv_head, logit_diff,
      compared, worst, worst_name.c_str(), worst_rel);
}

INSTANTIATE_TEST_SUITE_P(Patterns, NanochatParity, ::testing::ValuesIn(kNanochatCases));

// Cached decoding (the smear's previous embedding kept between calls, the value embeddings of
// the new tokens) gives the full forward's logits; a call that does not continue the last one
// is refused, naming model.smear.
TEST(NanochatCache, DecodingEqualsTheFullForward) {
  const auto mcfg = options::read_gpt_config(nanochat_config({"SSSL", true, 2}), 0);
  torch::manual_seed(3);
  Gpt model(mcfg);
  model->eval();
  torch::NoGradGuard no_grad;
  model->nanochat->smear_lambda.fill_(0.3);
  auto ids = torch::randint(0, mcfg.vocab_size, {2, 24}, torch::kLong);
  auto full = model->forward(ids);  // (2, 24, V)
  auto cache = model->make_cache(2, 32);
  std::vector<torch::Tensor> parts{model->forward_cached(ids.narrow(1, 0, 16), *cache)};
  for (int64_t t = 16; t < 24; ++t)
    parts.push_back(model->forward_cached(ids.narrow(1, t, 1), *cache));
  EXPECT_LE((torch::cat(parts, 1) - full).abs().max().item<double>(), 1e-5);
  auto other = model->make_cache(2, 32);
  other->advance(4);  // positions 0..3 were never seen by this model
  try {
    model->forward_cached(ids.narrow(1, 4, 1), *other);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.smear"), std::string::npos) << e.what();
  }
}

// window_pattern SSSL (windows 129, 129, 129, full) through cached decoding past the window:
// the windowed layers' caches keep only their last 128 tokens (KvCache::window_keep), the smear
// still reads the embedding the last call kept, and the logits are the full forward's.
TEST(NanochatCache, WindowBoundedDecodingEqualsTheFullForward) {
  const auto mcfg = options::read_gpt_config(nanochat_config({"SSSL", true, 2}), 0);
  ASSERT_EQ(mcfg.layer_windows(), (std::vector<int64_t>{129, 129, 129, 0}));
  torch::manual_seed(4);
  Gpt model(mcfg);
  model->eval();
  torch::NoGradGuard no_grad;
  model->nanochat->smear_lambda.fill_(0.3);
  auto ids = torch::randint(0, mcfg.vocab_size, {2, 180}, torch::kLong);
  auto full = model->forward(ids);  // (2, 180, V)
  auto cache = model->make_cache(2, 256);
  std::vector<torch::Tensor> parts{model->forward_cached(ids.narrow(1, 0, 140), *cache)};
  for (int64_t t = 140; t < 180; ++t)
    parts.push_back(model->forward_cached(ids.narrow(1, t, 1), *cache));
  EXPECT_LE((torch::cat(parts, 1) - full).abs().max().item<double>(), 1e-5);
  const int64_t per_token = 2 * 2 * 2 * 16 * 4;  // K and V, B 2, kv heads 2, D 16, fp32
  EXPECT_EQ(cache->bytes(), (3 * 128 + 180) * per_token);
}

// The d12 preset at vocabulary 8192 has the reference's parameter counts: 135266786 in all, and
// nanochat's scaling parameters (transformer.h and lm_head, what train.target_param_data_ratio
// multiplies) 91226544, both counted from bench/reference/nanochat_gpt.py's model.
TEST(NanochatPreset, ParameterCountsAreTheReferences) {
  auto cfg = core::Config::defaults();
  cfg.merge_yaml_file(testing::source_dir() + "/configs/nanochat-d12.yaml");
  cfg.set("model.vocab_size", "8192", "test");
  const auto mcfg = options::read_gpt_config(cfg, 0);
  EXPECT_EQ(mcfg.num_params(), 135266786);
  EXPECT_EQ(mcfg.scaling_params(), 91226544);
}

// nanochat's window w (FA3: i - j <= w) is lmtrain's w + 1; L and the last layer are full.
TEST(NanochatWindows, PatternMapsOntoPerLayerWindows) {
  EXPECT_EQ(options::windows_from_pattern("SSSL", 6, 2048),
            (std::vector<int64_t>{513, 513, 513, 0, 513, 0}));
  EXPECT_EQ(options::windows_from_pattern("sl", 3, 1000), (std::vector<int64_t>{257, 0, 0}));
  EXPECT_TRUE(options::windows_from_pattern("L", 4, 2048).empty());
  EXPECT_TRUE(options::windows_from_pattern("SSSL", 4, 128).empty());  // 128 covers 128 tokens
  EXPECT_TRUE(options::windows_from_pattern("", 4, 2048).empty());
  try {
    options::windows_from_pattern("SXL", 4, 2048);
    ADD_FAILURE() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("model.window_pattern"), std::string::npos);
  }
}

}  // namespace
}  // namespace lmtrain::model
