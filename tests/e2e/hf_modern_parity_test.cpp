// Parity with transformers for scaled RoPE, sliding windows and Mistral (issue 40), on the
// models of tests/fixtures/hf_modern (made by make_hf_modern_fixtures.py): Llama with llama3
// and linear scaling, Qwen3 with YaRN (default and mscale / betas / untruncated), Mistral with
// and without a window, Qwen2 and Qwen3 with sliding layers; transformers 4.x and 5.x configs;
// every one with head_dim 16 != hidden_size / heads; 40-token inputs, past the windows (5, 6)
// and past original_max_position_embeddings (16, 32).
//   - import: logits within 1e-4 of transformers', and the greedy tokens of transformers' full
//     forward without a cache, from lmtrain's cached generation and from its full forward;
//     windowed models also with each KV cache bounded by the windows (16 tokens after the
//     40-token prompt, 56 in all, past windows of 5 and 6): the same tokens with the exact
//     cache, H2O and StreamingLLM with room for the whole sequence, the exact cache's bytes
//     those of W - 1 tokens per windowed layer, and the lossy int8/int4 caches the tokens they
//     give unbounded (window_bound=0);
//   - export: `lmtrain export hf` loads in transformers with the original's logits (1e-5), its
//     config.json keeps the original's rope type and windows, and imports back to the same
//     logits.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_model.h"
#include "infer/generator.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

namespace fs = std::filesystem;

std::string modern_fixtures() { return source_dir() + "/tests/fixtures/hf_modern"; }

nlohmann::json modern_reference() {
  return nlohmann::json::parse(read_text(modern_fixtures() + "/reference.json"));
}

torch::Tensor modern_logits(model::GptImpl& m, const std::vector<int64_t>& ids) {
  torch::NoGradGuard g;
  return m.forward(torch::tensor(ids).unsqueeze(0)).squeeze(0);  // (T, V)
}

double modern_worst_diff(const torch::Tensor& ours, const nlohmann::json& theirs) {
  double worst = 0;
  const auto rows = theirs.get<std::vector<std::vector<float>>>();
  EXPECT_EQ(ours.size(0), static_cast<int64_t>(rows.size()));
  for (size_t t = 0; t < rows.size(); ++t) {
    worst = std::max(worst, (ours[t] - torch::tensor(rows[t])).abs().max().item<double>());
  }
  return worst;
}

// Greedy tokens from full forwards (no cache), as the reference was made.
std::vector<uint32_t> modern_greedy_full_forward(model::GptImpl& m, std::vector<int64_t> ids,
                                                 int n) {
  std::vector<uint32_t> out;
  for (int i = 0; i < n; ++i) {
    const auto next = modern_logits(m, ids)[-1].argmax().item<int64_t>();
    out.push_back(static_cast<uint32_t>(next));
    ids.push_back(next);
  }
  return out;
}

std::string modern_import(const std::string& hf_dir, const std::string& run) {
  auto imp = run_command(lmtrain_binary() + " import hf " + hf_dir + " --output " + run);
  EXPECT_EQ(imp.exit_code, 0) << imp.output;
  return imp.output;
}

// Generation of a windowed model with window-bounded caches (KvCache::window_keep).
void modern_bounded_generation(model::GptImpl& m, const std::vector<uint32_t>& prompt,
                               const std::vector<uint32_t>& want) {
  infer::SamplingOptions greedy;
  greedy.temperature = 0;
  auto run = [&](const std::string& policy) {
    return infer::generate_batch(m, {prompt}, {static_cast<int64_t>(want.size())}, greedy, 0, -1,
                                 infer::parse_kv_policy(policy));
  };
  // The prompt and all but the last new token go through the cache.
  const auto length = static_cast<int64_t>(prompt.size() + want.size()) - 1;
  ASSERT_LT(length, 60) << "the policies below hold 60 tokens";
  for (const std::string policy :
       {"full", "h2o:budget=60,recent=4", "streaming:sinks=0,window=60"}) {
    SCOPED_TRACE(policy);
    EXPECT_EQ(run(policy).rows[0].tokens, want);
  }
  const auto& c = m.config();
  const int64_t per_token = 2 * c.kv_heads() * c.head_dim() * 4;  // K and V, fp32
  int64_t bounded = 0;
  for (const int64_t w : c.layer_windows()) bounded += (w > 0 ? w - 1 : length) * per_token;
  EXPECT_EQ(run("full").peak_cache_bytes, bounded);
  EXPECT_EQ(run("full:window_bound=0").peak_cache_bytes, c.n_layer * length * per_token);
  for (const std::string policy : {"int8:group=2,residual=2", "int4:group=2,residual=2"}) {
    SCOPED_TRACE(policy);
    const auto lossy = run(policy);
    EXPECT_EQ(lossy.rows[0].tokens, run(policy + ",window_bound=0").rows[0].tokens);
    EXPECT_LT(lossy.peak_cache_bytes, run(policy + ",window_bound=0").peak_cache_bytes);
  }
}

TEST(HfModernParity, ImportMatchesTransformersLogitsAndGreedyTokens) {
  const auto ref = modern_reference();
  ASSERT_GE(ref["models"].size(), 11u);
  TempDir tmp("lmtrain_modern_parity");
  for (const auto& [name, r] : ref["models"].items()) {
    SCOPED_TRACE(name);
    const std::string run = tmp.file(name);
    modern_import(modern_fixtures() + "/" + name, run);
    auto m = train::load_inference_model(run);
    const auto ids = r["input_ids"].get<std::vector<int64_t>>();
    const double worst = modern_worst_diff(modern_logits(*m.model, ids), r["logits"]);
    std::cout << "import " << name << " (" << r["config_style"].get<std::string>()
              << "): worst |logit diff| = " << worst << "; " << m.model->config().describe()
              << "\n";
    EXPECT_LE(worst, 1e-4);
    const auto want = r["greedy"].get<std::vector<uint32_t>>();
    EXPECT_EQ(modern_greedy_full_forward(*m.model, ids, 16), want);
    infer::SamplingOptions greedy;
    greedy.temperature = 0;
    const std::vector<uint32_t> prompt(ids.begin(), ids.end());
    EXPECT_EQ(infer::generate(*m.model, prompt, 16, greedy, 0, -1), want);
    if (m.model->config().windowed()) modern_bounded_generation(*m.model, prompt, want);
  }
}

TEST(HfModernParity, ExportLoadsInTransformersAndRoundTrips) {
  const auto ref = modern_reference();
  TempDir tmp("lmtrain_modern_export");
  std::string pairs, ids_text;
  for (const auto& id : ref["models"].begin().value()["input_ids"]) {
    ids_text += (ids_text.empty() ? "" : ",") + std::to_string(id.get<int64_t>());
  }
  for (const auto& [name, r] : ref["models"].items()) {
    SCOPED_TRACE(name);
    const std::string run = tmp.file(name), out = tmp.file(name + "_hf");
    modern_import(modern_fixtures() + "/" + name, run);
    auto exp = run_command(lmtrain_binary() + " export hf " + run + " " + out);
    ASSERT_EQ(exp.exit_code, 0) << exp.output;
    pairs += " " + out + ":" + modern_fixtures() + "/" + name;
    // The exported config.json names the same scaling and windows as the original.
    const auto theirs =
        nlohmann::json::parse(read_text(modern_fixtures() + "/" + name + "/config.json"));
    const auto ours = nlohmann::json::parse(read_text(out + "/config.json"));
    EXPECT_EQ(ours["model_type"], theirs["model_type"]);
    const auto& rope =
        theirs.contains("rope_parameters") ? theirs["rope_parameters"] : theirs["rope_scaling"];
    if (rope.is_object() && rope.value("rope_type", "default") != "default") {
      EXPECT_EQ(ours["rope_parameters"]["rope_type"], rope["rope_type"]);
      EXPECT_EQ(ours["rope_scaling"]["rope_type"], rope["rope_type"]);
    }
    if (theirs.value("use_sliding_window", theirs["model_type"] == "mistral") &&
        !theirs["sliding_window"].is_null()) {
      EXPECT_EQ(ours["sliding_window"], theirs["sliding_window"]);
    }
    // And imports back to the same model.
    auto first = train::load_inference_model(run);
    modern_import(out, run + "_again");
    auto again = train::load_inference_model(run + "_again");
    const auto ids = r["input_ids"].get<std::vector<int64_t>>();
    EXPECT_TRUE(torch::equal(modern_logits(*first.model, ids), modern_logits(*again.model, ids)));
    EXPECT_EQ(first.model->config().describe(), again.model->config().describe());
  }
  auto r = run_hf_check("export-parity" + pairs + " --tol 1e-5 --ids " + ids_text);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const auto diffs = check_result(r)["max_abs_diff"];
  EXPECT_EQ(diffs.size(), ref["models"].size());
  for (const auto& [dir, diff] : diffs.items()) {
    std::cout << "export " << fs::path(dir).filename().string()
              << ": worst |logit diff| vs the original in transformers = " << diff << "\n";
  }
}

}  // namespace
}  // namespace lmtrain::testing
