// Hugging Face import/export: round trips for every supported family, GPT-2's Conv1D layout
// and hub naming, sharded checkpoints, clear errors. Parity with transformers itself is
// hf_parity_test.cpp; bad HF directories are hf_bad_input_test.cpp.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/config.h"
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
  // A tiny run NAME_src, exported to NAME_hf and imported back into NAME_imported (returned).
  static std::string imported_copy(const std::string& name) {
    const std::string run = train(name + "_src", "");
    const std::string hf = dir_->file(name + "_hf"), imported = dir_->file(name + "_imported");
    auto e = run_command(lmtrain_binary() + " export hf " + run + " " + hf);
    EXPECT_EQ(e.exit_code, 0) << e.output;
    auto i = run_command(lmtrain_binary() + " import hf " + hf + " --output " + imported);
    EXPECT_EQ(i.exit_code, 0) << i.output;
    return imported;
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
  auto r = import("gemma3", {{"model_type", "gemma3"}});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("model_type 'gemma3' is not supported"), std::string::npos) << r.output;
  // Linear scaling without its factor.
  r = import("scaled", {{"model_type", "llama"}, {"rope_scaling", {{"type", "linear"}}}});
  EXPECT_NE(r.output.find("rope_scaling.factor must be a number >= 1"), std::string::npos)
      << r.output;
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

// The README's fine-tune of an import, `lmtrain train --config RUN/config.yaml --data.dir=D`,
// trains as is: the import's config starts from the import (model.init_from), one epoch
// (train.epochs; max_steps and epochs were both 0 before, a refusal), into RUN-finetune
// (run.dir was RUN itself, refused as holding a checkpoint). Naming the import as run.dir
// is refused, also with --overwrite, which would have moved the weights aside before reading.
TEST_F(HfTest, ImportWritesAConfigThatFineTunesIntoItsOwnRunDir) {
  const std::string imported = imported_copy("cfg");
  core::Config cfg = core::Config::defaults();
  cfg.merge_yaml_file(imported + "/config.yaml");
  const std::string abs = fs::absolute(imported).lexically_normal().string();
  EXPECT_EQ(cfg.get_string("model.init_from"), abs);
  EXPECT_EQ(cfg.get_string("run.dir"), abs + "-finetune");
  EXPECT_EQ(cfg.get_int("train.epochs"), 1);
  EXPECT_EQ(cfg.get_int("train.max_steps"), 0);

  auto r = run_command(lmtrain_binary() + " train --config " + imported +
                       "/config.yaml --train.threads=1 --data.dir=" + data_);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "initial weights from " + abs)) << r.output;
  EXPECT_TRUE(fs::exists(abs + "-finetune/checkpoints/latest/meta.json"));
  const auto metrics = read_text(abs + "-finetune/metrics.jsonl");
  EXPECT_TRUE(contains(metrics, "\"epoch\":")) << metrics;
  // The import still holds its one checkpoint and nothing of the fine-tune.
  EXPECT_EQ(checkpoint_steps(imported), std::vector<std::string>{"step_00000000"});
  EXPECT_FALSE(fs::exists(imported + "/train.log"));

  for (const std::string extra : {"", " --overwrite"}) {
    SCOPED_TRACE(extra);
    auto into = run_command(lmtrain_binary() + " train --config " + imported +
                            "/config.yaml --train.max_steps=2 --data.dir=" + data_ +
                            " --run.dir=" + imported + extra);
    expect_refused(into, {"run.dir = " + imported, "holds model.init_from", "-finetune"});
    EXPECT_EQ(checkpoint_steps(imported), std::vector<std::string>{"step_00000000"});
    EXPECT_FALSE(fs::exists(imported + "/previous-1"));
  }
}

// Fine-tuning a model that brings its own tokenizer (the README's Qwen3 LoRA example): data
// prepared with another tokenizer is refused, naming it; `prepare --tokenizer` encodes with the
// import's tokenizer.json, and the fine-tune then runs.
TEST_F(HfTest, PrepareWithTheImportsTokenizerFineTunesIt) {
  const std::string imported = imported_copy("tok");
  const std::string corpus = write_synthetic_corpus(dir_->file("tok_corpus"), 300, 11);
  const std::string prepare = lmtrain_binary() + " prepare --input " + corpus +
                              " --doc_separator % --val_fraction 0.1 --output ";
  const std::string own = dir_->file("tok_own"), theirs = dir_->file("tok_theirs");
  auto own_prep = run_command(prepare + own + " --vocab_size 300");
  ASSERT_EQ(own_prep.exit_code, 0) << own_prep.output;
  const std::string finetune = lmtrain_binary() + " train --config " + imported +
                               "/config.yaml --train.max_steps=2 --train.threads=1 --data.dir=";
  expect_refused(run_command(finetune + own), {"different tokenizer", "data.dir = " + own});

  const std::string tok = imported + "/checkpoints/latest/tokenizer.json";
  auto p = run_command(prepare + theirs + " --tokenizer " + tok);
  ASSERT_EQ(p.exit_code, 0) << p.output;
  const auto summary = nlohmann::json::parse(read_text(theirs + "/prepare.json"));
  const auto meta = nlohmann::json::parse(read_text(imported + "/checkpoints/latest/meta.json"));
  EXPECT_EQ(summary["tokenizer_hash"], meta["tokenizer_hash"]);
  EXPECT_EQ(read_text(theirs + "/tokenizer.json"), read_text(tok));
  auto f = run_command(finetune + theirs);
  ASSERT_EQ(f.exit_code, 0) << f.output;

  expect_refused(
      run_command(prepare + dir_->file("tok_both") + " --tokenizer " + tok + " --vocab_size 300"),
      {"--vocab_size and --tokenizer"});
  expect_refused(
      run_command(prepare + dir_->file("tok_none") + " --tokenizer " + dir_->file("no_such.json")),
      {"--tokenizer", "no_such.json", "is not a file"});
}

// A model of the shipped moe-tiny preset (Llama attention, MoE feed-forwards) exports as
// Mixtral (hf_parity_test.cpp checks its logits in transformers); what Mixtral or Qwen3-MoE
// cannot compute is refused, naming the option.
TEST_F(HfTest, MoeExportsAsMixtralOrRefusesNamingTheOption) {
  const std::string moe = " --config " + source_dir() +
                          "/configs/moe-tiny.yaml --model.n_layer=2 --model.n_embd=32"
                          " --model.n_head=2 --model.mlp_hidden=64 --model.moe.expert_hidden=32"
                          " --model.block_size=32 --data.seq_len=32 --train.total_batch_size=512";
  auto export_of = [&](const std::string& name, const std::string& flags) {
    const std::string run = train(name, moe + flags);
    return run_command(lmtrain_binary() + " export hf " + run + " " + dir_->file(name + "_hf"));
  };
  auto r = export_of("moe_tiny", "");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto config = nlohmann::json::parse(read_text(dir_->file("moe_tiny_hf/config.json")));
  EXPECT_EQ(config["model_type"], "mixtral");
  EXPECT_EQ(config["num_local_experts"], 8);
  EXPECT_EQ(config["num_experts_per_tok"], 2);
  r = export_of("moe_shared", " --model.moe.shared_experts=1");
  expect_refused(r, {"model.arch=llama with MoE layers", "mixtral", "model.moe.shared_experts=0"});
  r = export_of("moe_every", " --model.moe.every=2");
  expect_refused(r, {"mixtral", "model.moe.every=1", "qwen3_moe would need model.qk_norm=true"});
  r = export_of("moe_sigmoid", " --model.qk_norm=true --model.moe.gate=sigmoid");
  expect_refused(r, {"exports as Hugging Face's qwen3_moe", "model.moe.gate=softmax"});
}

// `lmtrain --help`, `import --help` and `export --help` name every family, the MoE ones too.
TEST(HfHelp, HelpListsTheMoeFamilies) {
  for (const std::string cmd : {"--help", "import --help", "export --help"}) {
    SCOPED_TRACE(cmd);
    auto r = run_command(lmtrain_binary() + " " + cmd);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    for (const char* family : {"gpt2", "llama", "qwen2", "qwen3", "qwen3_moe", "mixtral"}) {
      EXPECT_TRUE(contains(r.output, family)) << family << " missing from:\n" << r.output;
    }
  }
}

TEST_F(HfTest, FineTunesFromAnImportedCheckpoint) {
  const std::string imported = imported_copy("ft");
  auto r = run_command(lmtrain_binary() + " train" + tiny_train_flags() + " --data.dir=" + data_ +
                       " --run.dir=" + dir_->file("ft_run") +
                       " --train.max_steps=2 --model.init_from=" + imported);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("initial weights from"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace lmtrain::testing
