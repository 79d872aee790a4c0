// Parity with Hugging Face transformers itself (the project venv's, through
// tests/fixtures/hf_check.py):
//   - import: every model of tests/fixtures/hf (made by make_hf_fixtures.py: gpt2, llama,
//     qwen2, qwen3, qwen3_moe, mixtral; transformers 4.x and 5.x config styles; tied and
//     untied heads; GQA and MQA; MoE experts stacked and one tensor per expert)
//     gives transformers' logits within 1e-4 and its greedy tokens;
//   - export: `lmtrain export hf` of each imported fixture loads in AutoModelForCausalLM with
//     the original's logits;
//   - trained: a model trained by lmtrain (GPT-2 and Qwen3 style) loads in transformers with
//     lmtrain's logits, AutoTokenizer encodes the prompt as lmtrain does, and transformers'
//     greedy generation equals `lmtrain generate --temperature 0`.
// Nothing skips: the fixtures are committed and the venv is a requirement of the tests.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "checkpoint/checkpoint_model.h"
#include "data/bpe_tokenizer.h"
#include "e2e/corpus.h"
#include "infer/generator.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

namespace fs = std::filesystem;

std::string fixtures() { return source_dir() + "/tests/fixtures/hf"; }

nlohmann::json reference() {
  const std::string path = fixtures() + "/reference.json";
  if (!fs::exists(path)) {
    throw std::runtime_error(path + " is missing: run tests/fixtures/make_hf_fixtures.py");
  }
  return nlohmann::json::parse(read_text(path));
}

// max |a - b| over a (T, V) tensor and a (T x V) JSON array.
double worst_diff(const torch::Tensor& ours, const nlohmann::json& theirs) {
  const auto want = theirs.get<std::vector<std::vector<float>>>();
  EXPECT_EQ(ours.size(0), static_cast<int64_t>(want.size()));
  double worst = 0;
  for (size_t t = 0; t < want.size() && static_cast<int64_t>(t) < ours.size(0); ++t) {
    worst = std::max(worst, (ours[t] - torch::tensor(want[t])).abs().max().item<double>());
  }
  return worst;
}

torch::Tensor lmtrain_logits(const std::string& run, const std::vector<int64_t>& ids) {
  auto m = train::load_inference_model(run);
  torch::NoGradGuard g;
  return m.model->forward(torch::tensor(ids).unsqueeze(0)).squeeze(0);  // (T, V)
}

TEST(HfParity, ImportMatchesTransformersLogitsAndGreedyTokens) {
  const auto ref = reference();
  ASSERT_GE(ref["models"].size(), 4u);
  TempDir tmp("lmtrain_parity");
  for (const auto& [name, r] : ref["models"].items()) {
    SCOPED_TRACE(name);
    const std::string run = tmp.file(name);
    auto imp = run_command(lmtrain_binary() + " import hf " + fixtures() + "/" + name +
                           " --output " + run);
    ASSERT_EQ(imp.exit_code, 0) << imp.output;
    const auto ids = r["input_ids"].get<std::vector<int64_t>>();
    const double worst = worst_diff(lmtrain_logits(run, ids), r["logits"]);
    std::cout << "import " << name << " (" << r["config_style"].get<std::string>()
              << " config): worst |logit diff| = " << worst << "\n";
    EXPECT_LE(worst, 1e-4);
    auto m = train::load_inference_model(run);
    infer::SamplingOptions greedy;
    greedy.temperature = 0;
    const std::vector<uint32_t> prompt(ids.begin(), ids.end());
    EXPECT_EQ(infer::generate(*m.model, prompt, 16, greedy, 0, -1),
              r["greedy"].get<std::vector<uint32_t>>());
  }
}

TEST(HfParity, ExportLoadsInTransformersWithTheOriginalsLogits) {
  const auto ref = reference();
  TempDir tmp("lmtrain_parity_export");
  std::string pairs;
  for (const auto& [name, r] : ref["models"].items()) {
    SCOPED_TRACE(name);
    const std::string run = tmp.file(name), out = tmp.file(name + "_hf");
    auto imp = run_command(lmtrain_binary() + " import hf " + fixtures() + "/" + name +
                           " --output " + run);
    ASSERT_EQ(imp.exit_code, 0) << imp.output;
    auto exp = run_command(lmtrain_binary() + " export hf " + run + " " + out);
    ASSERT_EQ(exp.exit_code, 0) << exp.output;
    pairs += " " + out + ":" + fixtures() + "/" + name;
  }
  auto r = run_hf_check("export-parity" + pairs + " --tol 1e-5");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const auto diffs = check_result(r)["max_abs_diff"];
  EXPECT_EQ(diffs.size(), ref["models"].size());
  for (const auto& [dir, diff] : diffs.items()) {
    std::cout << "export " << fs::path(dir).filename().string()
              << ": worst |logit diff| vs the original in transformers = " << diff << "\n";
  }
}

class HfTrainedParity : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("lmtrain_hf_trained");
    data_ = prepare_synthetic_data(dir_->path());
  }
  static void TearDownTestSuite() { delete dir_; }
  static TempDir* dir_;
  static std::string data_;
};
TempDir* HfTrainedParity::dir_ = nullptr;
std::string HfTrainedParity::data_;

std::vector<uint32_t> parse_ids(const std::string& text) {
  std::vector<uint32_t> ids;
  std::istringstream in(text);
  for (uint32_t id; in >> id;) ids.push_back(id);
  return ids;
}

TEST_F(HfTrainedParity, TrainedModelsLoadInTransformersAndGenerateTheSameTokens) {
  const std::string qwen3 =
      " --model.arch=qwen3 --model.norm=rmsnorm --model.pos=rope --model.mlp=swiglu"
      " --model.mlp_hidden=80 --model.bias=false --model.n_head=4 --model.n_kv_head=2"
      " --model.head_dim=16 --model.qk_norm=true --model.norm_eps=1e-6"
      " --model.rope_theta=1000000 --model.tie_embeddings=true";
  const std::string prompt = "The old man";
  for (const auto& [arch, flags] :
       std::vector<std::pair<std::string, std::string>>{{"gpt2", ""}, {"qwen3", qwen3}}) {
    SCOPED_TRACE(arch);
    const std::string run = dir_->file(arch), hf = dir_->file(arch + "_hf");
    auto t = run_command(lmtrain_binary() + " train" + tiny_train_flags() + " --data.dir=" + data_ +
                         " --run.dir=" + run + " --train.max_steps=120" + flags);
    ASSERT_EQ(t.exit_code, 0) << t.output;
    auto e = run_command(lmtrain_binary() + " export hf " + run + " " + hf);
    ASSERT_EQ(e.exit_code, 0) << e.output;
    auto r = run_hf_check("model-outputs " + hf + " --prompt '" + prompt + "' --greedy 20");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto theirs = check_result(r);
    // AutoTokenizer (tokenizer.json + tokenizer_config.json of the export) = lmtrain's encoder.
    const auto tok = data::BpeTokenizer::load(run + "/checkpoints/latest/tokenizer.json");
    const auto ours_ids = tok.encode_with_special(prompt);
    ASSERT_EQ(theirs["input_ids"].get<std::vector<uint32_t>>(), ours_ids);
    const std::vector<int64_t> ids(ours_ids.begin(), ours_ids.end());
    const double worst = worst_diff(lmtrain_logits(run, ids), theirs["logits"]);
    std::cout << "trained " << arch << ": worst |logit diff| lmtrain vs transformers = " << worst
              << "\n";
    EXPECT_LE(worst, 1e-4);
    auto g =
        run_command(lmtrain_binary() + " generate --checkpoint " + run + " --prompt '" + prompt +
                    "' --max_new_tokens 20 --temperature 0 --stop_at_eot=false --print_ids");
    ASSERT_EQ(g.exit_code, 0) << g.output;
    const auto greedy = theirs["greedy"].get<std::vector<uint32_t>>();
    EXPECT_EQ(parse_ids(g.output), greedy) << g.output;
    std::cout << "  greedy: " << g.output;
    // A comparison worth making: not one token repeated.
    EXPECT_GT(std::set<uint32_t>(greedy.begin(), greedy.end()).size(), 2u);
  }
}

// A model of the shipped moe-tiny preset (8 SwiGLU experts, top-2 renormalised softmax gates,
// dropless, Llama attention, tied head), shrunk and trained briefly, exports as Mixtral; the
// same with Qwen3's QK-norm as Qwen3-MoE. Both load in transformers with lmtrain's logits and
// generate lmtrain's greedy tokens.
TEST_F(HfTrainedParity, MoeTinyExportsAsMixtralAndQwen3MoeWithTheSameLogits) {
  const std::string moe_tiny =
      " --config " + source_dir() +
      "/configs/moe-tiny.yaml --model.n_layer=2 --model.n_embd=32 --model.n_head=2"
      " --model.mlp_hidden=64 --model.moe.expert_hidden=32 --model.block_size=32"
      " --data.seq_len=32 --train.micro_batch_size=8 --train.total_batch_size=512"
      " --optim.warmup_steps=5 --train.eval_batches=4 --train.threads=1 --log.every=10"
      " --train.eval_every=0 --checkpoint.every=0 --train.max_steps=60";
  const std::string prompt = "The old man";
  for (const auto& [family, flags] : std::vector<std::pair<std::string, std::string>>{
           {"mixtral", ""}, {"qwen3_moe", " --model.qk_norm=true --model.tie_embeddings=false"}}) {
    SCOPED_TRACE(family);
    const std::string run = dir_->file("moe_" + family), hf = run + "_hf";
    auto t = run_command(lmtrain_binary() + " train" + moe_tiny + flags + " --data.dir=" + data_ +
                         " --run.dir=" + run);
    ASSERT_EQ(t.exit_code, 0) << t.output;
    auto e = run_command(lmtrain_binary() + " export hf " + run + " " + hf);
    ASSERT_EQ(e.exit_code, 0) << e.output;
    EXPECT_EQ(nlohmann::json::parse(read_text(hf + "/config.json"))["model_type"], family);
    auto r = run_hf_check("model-outputs " + hf + " --prompt '" + prompt + "' --greedy 20");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto theirs = check_result(r);
    const auto ids64 = theirs["input_ids"].get<std::vector<int64_t>>();
    const double worst = worst_diff(lmtrain_logits(run, ids64), theirs["logits"]);
    std::cout << "moe-tiny as " << family
              << ": worst |logit diff| lmtrain vs transformers = " << worst << "\n";
    EXPECT_LE(worst, 1e-4);
    auto g =
        run_command(lmtrain_binary() + " generate --checkpoint " + run + " --prompt '" + prompt +
                    "' --max_new_tokens 20 --temperature 0 --stop_at_eot=false --print_ids");
    ASSERT_EQ(g.exit_code, 0) << g.output;
    EXPECT_EQ(parse_ids(g.output), theirs["greedy"].get<std::vector<uint32_t>>()) << g.output;
  }
}

}  // namespace
}  // namespace lmtrain::testing
