// Hugging Face import/export: round trips for every supported family, GPT-2's Conv1D layout
// and hub naming, sharded checkpoints, clear errors. Parity with transformers itself is
// hf_parity_test.cpp; bad HF directories are hf_bad_input_test.cpp.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/safetensors.h"
#include "e2e/corpus.h"
#include "e2e/dist_harness.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

namespace fs = std::filesystem;

class HfTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("lmtrain_hf");
    data_ = prepare_synthetic_data(dir_->path());
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string train(const std::string& name, const std::string& model_flags) {
    const std::string run = dir_->file(name);
    auto r = run_command(lmtrain_binary() + " train" + tiny_train_flags() + " --data.dir=" + data_ +
                         " --run.dir=" + run + " --train.max_steps=3" + model_flags);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return run;
  }
  static TempDir* dir_;
  static std::string data_;
};
TempDir* HfTest::dir_ = nullptr;
std::string HfTest::data_;

const char* kLlamaFamily =
    " --model.norm=rmsnorm --model.pos=rope --model.mlp=swiglu --model.mlp_hidden=80"
    " --model.bias=false --model.n_kv_head=1 --model.head_dim=16 --model.norm_eps=1e-6";

TEST_F(HfTest, ExportThenImportRoundTripsEveryFamilyExactly) {
  const std::vector<std::pair<std::string, std::string>> families = {
      {"gpt2", ""},
      {"llama", std::string(kLlamaFamily) + " --model.arch=llama --model.tie_embeddings=false"},
      {"qwen2", std::string(kLlamaFamily) + " --model.arch=qwen2 --model.qkv_bias=true"},
      {"qwen3", std::string(kLlamaFamily) + " --model.arch=qwen3 --model.qk_norm=true"},
  };
  for (const auto& [arch, flags] : families) {
    SCOPED_TRACE(arch);
    const std::string run = train(arch, flags);
    const std::string hf = dir_->file(arch + "_hf"), back = dir_->file(arch + "_back");
    auto e = run_command(lmtrain_binary() + " export hf " + run + " " + hf);
    ASSERT_EQ(e.exit_code, 0) << e.output;
    const auto config = nlohmann::json::parse(read_text(hf + "/config.json"));
    EXPECT_EQ(config["model_type"], arch);
    EXPECT_TRUE(fs::exists(hf + "/tokenizer.json"));
    auto i = run_command(lmtrain_binary() + " import hf " + hf + " --output " + back);
    ASSERT_EQ(i.exit_code, 0) << i.output;
    EXPECT_EQ(max_param_rel_diff(back + "/checkpoints/latest", run + "/checkpoints/latest"), 0.0);
    // The imported checkpoint samples exactly like the original.
    const std::string gen = " --prompt 'The cat' --max_new_tokens 12 --temperature 0";
    auto g1 = run_command(lmtrain_binary() + " generate --checkpoint " + run + gen);
    auto g2 = run_command(lmtrain_binary() + " generate --checkpoint " + back + gen);
    ASSERT_EQ(g1.exit_code, 0) << g1.output;
    EXPECT_EQ(g1.output, g2.output);
    // HF names on disk.
    const auto h = core::read_safetensors_header(hf + "/model.safetensors");
    std::set<std::string> names;
    for (const auto& entry : h.entries) names.insert(entry.name);
    if (arch == "gpt2") {
      EXPECT_TRUE(names.count("transformer.h.0.attn.c_attn.weight"));
    } else {
      EXPECT_TRUE(names.count("model.layers.0.self_attn.k_proj.weight"));
      EXPECT_TRUE(names.count("model.layers.1.mlp.gate_proj.weight"));
      EXPECT_EQ(names.count("model.layers.0.self_attn.q_norm.weight"), arch == "qwen3" ? 1u : 0u);
      EXPECT_EQ(names.count("model.layers.0.self_attn.q_proj.bias"), arch == "qwen2" ? 1u : 0u);
      EXPECT_EQ(names.count("lm_head.weight"), arch == "llama" ? 1u : 0u);
    }
  }
}

// A GPT-2 directory as the hub has it: no "transformer." prefix, Conv1D weights (in, out), the
// attention mask buffers, weights in fp16, split into two shards with an index.
TEST_F(HfTest, ImportsHubStyleShardedGpt2WithConv1DWeights) {
  const std::string hf = dir_->file("hub_gpt2");
  fs::create_directories(hf);
  const int64_t C = 32, V = 64, P = 16, L = 1;
  write_text(hf + "/config.json", nlohmann::json{{"model_type", "gpt2"},
                                                 {"n_layer", L},
                                                 {"n_head", 2},
                                                 {"n_embd", C},
                                                 {"n_positions", P},
                                                 {"vocab_size", V}}
                                      .dump());
  torch::manual_seed(5);
  std::map<std::string, at::Tensor> t = {
      {"wte.weight", torch::randn({V, C})},
      {"wpe.weight", torch::randn({P, C})},
      {"h.0.ln_1.weight", torch::randn({C})},
      {"h.0.ln_1.bias", torch::randn({C})},
      {"h.0.attn.c_attn.weight", torch::randn({C, 3 * C})},
      {"h.0.attn.c_attn.bias", torch::randn({3 * C})},
      {"h.0.attn.c_proj.weight", torch::randn({C, C})},
      {"h.0.attn.c_proj.bias", torch::randn({C})},
      {"h.0.attn.bias", torch::ones({1, 1, P, P})},
      {"h.0.ln_2.weight", torch::randn({C})},
      {"h.0.ln_2.bias", torch::randn({C})},
      {"h.0.mlp.c_fc.weight", torch::randn({C, 4 * C})},
      {"h.0.mlp.c_fc.bias", torch::randn({4 * C})},
      {"h.0.mlp.c_proj.weight", torch::randn({4 * C, C})},
      {"h.0.mlp.c_proj.bias", torch::randn({C})},
      {"ln_f.weight", torch::randn({C})},
      {"ln_f.bias", torch::randn({C})},
  };
  core::NamedTensors a, b;
  nlohmann::json map;
  for (const auto& [name, tensor] : t) {
    const bool first = name.rfind("h.0.mlp", 0) != 0;
    (first ? a : b).emplace_back(name, tensor.to(torch::kHalf));
    map[name] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  core::write_safetensors(hf + "/model-00001-of-00002.safetensors", a);
  core::write_safetensors(hf + "/model-00002-of-00002.safetensors", b);
  write_text(hf + "/model.safetensors.index.json", nlohmann::json{{"weight_map", map}}.dump());
  const std::string run = dir_->file("hub_gpt2_run");
  auto r = run_command(lmtrain_binary() + " import hf " + hf + " --output " + run);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto ours = core::read_safetensors(run + "/checkpoints/latest/model.safetensors");
  auto half = [&](const std::string& n) { return t.at(n).to(torch::kHalf).to(torch::kFloat); };
  EXPECT_TRUE(ours.tensors.at("transformer.h.0.attn.c_attn.weight")
                  .equal(half("h.0.attn.c_attn.weight").t()));  // (3C, C) = Conv1D transposed
  EXPECT_TRUE(ours.tensors.at("transformer.h.0.mlp.c_proj.weight")
                  .equal(half("h.0.mlp.c_proj.weight").t()));
  EXPECT_TRUE(ours.tensors.at("transformer.wte.weight").equal(half("wte.weight")));
  EXPECT_EQ(ours.tensors.count("lm_head.weight"), 0u);  // tied
}

TEST_F(HfTest, UnsupportedOrInconsistentCheckpointsAreClearErrors) {
  auto import = [&](const std::string& name, const nlohmann::json& config) {
    const std::string hf = dir_->file(name);
    fs::create_directories(hf);
    write_text(hf + "/config.json", config.dump());
    return run_command(lmtrain_binary() + " import hf " + hf + " --output " +
                       dir_->file(name + "_run"));
  };
  auto r = import("mistral", {{"model_type", "mistral"}});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("model_type 'mistral' is not supported"), std::string::npos) << r.output;
  r = import("scaled", {{"model_type", "llama"}, {"rope_scaling", {{"type", "linear"}}}});
  EXPECT_NE(r.output.find("rope_scaling"), std::string::npos) << r.output;
  r = import("noweights", {{"model_type", "gpt2"}, {"n_layer", 1}, {"n_embd", 8}, {"n_head", 2}});
  EXPECT_NE(r.output.find("neither model.safetensors"), std::string::npos) << r.output;
  // A tensor with the wrong shape is named.
  const std::string run = train("shape_src", "");
  const std::string hf = dir_->file("shape_hf");
  ASSERT_EQ(run_command(lmtrain_binary() + " export hf " + run + " " + hf).exit_code, 0);
  auto cfg = nlohmann::json::parse(read_text(hf + "/config.json"));
  cfg["n_positions"] = 64;  // the stored wpe has 32 rows
  write_text(hf + "/config.json", cfg.dump());
  r = run_command(lmtrain_binary() + " import hf " + hf + " --output " + dir_->file("shape_run"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(
      r.output.find("'transformer.wpe.weight' has shape [32, 32], the config implies [64, 32]"),
      std::string::npos)
      << r.output;
  // nanochat has no transformers class.
  const std::string nano = train("nano",
                                 " --model.arch=nanochat --model.norm=rmsnorm --model.pos=rope"
                                 " --model.mlp=relu2 --model.bias=false");
  r = run_command(lmtrain_binary() + " export hf " + nano + " " + dir_->file("nano_hf"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("no Hugging Face transformers equivalent"), std::string::npos)
      << r.output;
}

TEST_F(HfTest, FineTunesFromAnImportedCheckpoint) {
  const std::string run = train("ft_src", "");
  const std::string hf = dir_->file("ft_hf"), imported = dir_->file("ft_imported");
  ASSERT_EQ(run_command(lmtrain_binary() + " export hf " + run + " " + hf).exit_code, 0);
  ASSERT_EQ(run_command(lmtrain_binary() + " import hf " + hf + " --output " + imported).exit_code,
            0);
  auto r = run_command(lmtrain_binary() + " train" + tiny_train_flags() + " --data.dir=" + data_ +
                       " --run.dir=" + dir_->file("ft_run") +
                       " --train.max_steps=2 --model.init_from=" + imported);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("initial weights from"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace lmtrain::testing
