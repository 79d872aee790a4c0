// End to end: prepare -> train -> checkpoint -> eval -> generate on a synthetic corpus.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "data/token_split.h"
#include "e2e/corpus.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

// Cross-entropy (nats) of the val split under the train split's unigram distribution
// (add-one smoothed): what a model that ignores context achieves at best.
double unigram_baseline(const std::string& data_dir) {
  const auto train = data::TokenSplit::open(data_dir, "train");
  const auto val = data::TokenSplit::open(data_dir, "val");
  std::vector<double> counts(1 << 16, 1.0);
  double total = counts.size();
  for (size_t i = 0; i < train.size(); ++i) counts[train.at(i)] += 1, total += 1;
  double nll = 0;
  for (size_t i = 0; i < val.size(); ++i) nll -= std::log(counts[val.at(i)] / total);
  return nll / val.size();
}

TEST(EndToEnd, TrainBeatsUnigramBaselineThenGenerates) {
  TempDir dir("lmtrain_e2e");
  const std::string data = prepare_synthetic_data(dir.path());
  const std::string run = dir.file("run");
  auto r = run_command(lmtrain_binary() + " train" + tiny_train_flags() + " --data.dir=" + data +
                       " --run.dir=" + run + " --train.max_steps=150 --optim.lr=3e-3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("tok/s"), std::string::npos);

  // metrics.jsonl: a record per step with the contract's fields, and a final val_loss.
  std::ifstream in(run + "/metrics.jsonl");
  std::string line;
  int steps = 0;
  double val_loss = NAN, first_loss = NAN, last_loss = NAN;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("val_loss")) val_loss = j["val_loss"].get<double>();
    if (j.contains("loss")) {
      for (const char* k : {"step", "loss", "lr", "tokens_per_s"}) ASSERT_TRUE(j.contains(k)) << k;
      if (steps == 0) first_loss = j["loss"].get<double>();
      last_loss = j["loss"].get<double>();
      ++steps;
    }
  }
  EXPECT_EQ(steps, 150);
  const double baseline = unigram_baseline(data);
  EXPECT_LT(last_loss, first_loss);
  EXPECT_LT(val_loss, baseline) << "unigram baseline " << baseline;
  EXPECT_TRUE(std::filesystem::exists(run + "/config.yaml"));
  EXPECT_TRUE(std::filesystem::exists(run + "/train.log"));
  bool has_events = false;
  for (auto& e : std::filesystem::directory_iterator(run)) {
    has_events |= e.path().filename().string().rfind("events.out.tfevents.", 0) == 0;
  }
  EXPECT_TRUE(has_events);

  // eval reports the same val loss as the trainer's final evaluation on the same windows.
  auto ev = run_command(lmtrain_binary() + " eval --checkpoint " + run + " --batches 4");
  ASSERT_EQ(ev.exit_code, 0) << ev.output;
  EXPECT_NE(ev.output.find("val loss: "), std::string::npos) << ev.output;
  const double eval_loss = std::stod(ev.output.substr(ev.output.find("val loss: ") + 10));
  EXPECT_NEAR(eval_loss, val_loss, 1e-3);

  // generate: deterministic for a seed, continues in the corpus' vocabulary.
  const std::string gen = lmtrain_binary() + " generate --checkpoint " + run +
                          "/checkpoints/latest --prompt 'The cat' --max_new_tokens 30 --seed 3";
  auto g1 = run_command(gen), g2 = run_command(gen);
  ASSERT_EQ(g1.exit_code, 0) << g1.output;
  EXPECT_EQ(g1.output, g2.output);
  EXPECT_GT(g1.output.size(), 20u);
  auto greedy = run_command(gen + " --temperature 0");
  ASSERT_EQ(greedy.exit_code, 0) << greedy.output;
  EXPECT_NE(greedy.output.find(' '), std::string::npos) << greedy.output;
}

}  // namespace
}  // namespace lmtrain::testing

namespace lmtrain::testing {
namespace {

TEST(EndToEnd, EpochsDeriveTheStepCountFromTheData) {
  TempDir dir("lmtrain_epochs");
  const std::string data = prepare_synthetic_data(dir.path());
  const std::string run = dir.file("run");
  auto r = run_command(lmtrain_binary() + " train" + tiny_train_flags() + " --data.dir=" + data +
                       " --run.dir=" + run + " --train.max_steps=0 --epochs=2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto train = data::TokenSplit::open(data, "train");
  // 512 tokens per step = 16 windows of 32; windows = (tokens - 1) / 32.
  const int64_t steps_per_epoch = static_cast<int64_t>((train.size() - 1) / 32) / 16;
  const std::string expect = "done: " + std::to_string(2 * steps_per_epoch) + " steps";
  EXPECT_NE(r.output.find(expect), std::string::npos) << expect << "\n" << r.output;
  EXPECT_NE(r.output.find("epoch"), std::string::npos);

  auto bad = run_command(lmtrain_binary() + " train" + tiny_train_flags() + " --data.dir=" + data +
                         " --run.dir=" + run + "2 --train.max_steps=0 --epochs=0");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("train.max_steps"), std::string::npos) << bad.output;
  auto indivisible =
      run_command(lmtrain_binary() + " train" + tiny_train_flags() + " --data.dir=" + data +
                  " --run.dir=" + run + "3 --train.total_batch_size=500");
  EXPECT_EQ(indivisible.exit_code, 2) << indivisible.output;
  EXPECT_NE(indivisible.output.find("train.total_batch_size (--total_batch_size) = 500"),
            std::string::npos)
      << indivisible.output;
}

}  // namespace
}  // namespace lmtrain::testing

namespace lmtrain::testing {
namespace {

// A Qwen3-style model (RMSNorm, RoPE, SwiGLU, GQA, QK-norm, untied head) and a nanochat-style
// one (relu², soft-capping) through the same train -> eval -> generate path.
TEST(EndToEnd, QwenAndNanochatStyleModelsTrainAndGenerate) {
  TempDir dir("lmtrain_family");
  const std::string data = prepare_synthetic_data(dir.path());
  const std::string family =
      " --model.norm=rmsnorm --model.pos=rope --model.qk_norm=true"
      " --model.bias=false --model.tie_embeddings=false --model.head_dim=16";
  const std::vector<std::pair<std::string, std::string>> variants = {
      {"qwen3", " --model.arch=qwen3 --model.mlp=swiglu --model.mlp_hidden=96 --model.n_kv_head=1"},
      {"nanochat", " --model.arch=nanochat --model.mlp=relu2 --model.logit_softcap=15"},
      // Sliding windows of 8 on every layer and YaRN-scaled RoPE (issue 40).
      {"mistral",
       " --model.arch=mistral --model.mlp=swiglu --model.mlp_hidden=96 --model.qk_norm=false"
       " --model.windows=8 --model.rope_scaling=yarn --model.rope_factor=2"
       " --model.rope_original_max=16"},
  };
  for (const auto& [name, extra] : variants) {
    SCOPED_TRACE(name);
    const std::string run = dir.file(name);
    auto r =
        run_command(lmtrain_binary() + " train" + tiny_train_flags() + " --data.dir=" + data +
                    " --run.dir=" + run + " --train.max_steps=60 --optim.lr=3e-3" + family + extra);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(name + ": 2 layers"), std::string::npos) << r.output;
    double first = NAN, last = NAN;
    std::ifstream in(run + "/metrics.jsonl");
    std::string line;
    while (std::getline(in, line)) {
      auto j = nlohmann::json::parse(line);
      if (!j.contains("loss")) continue;
      if (std::isnan(first)) first = j["loss"].get<double>();
      last = j["loss"].get<double>();
    }
    EXPECT_LT(last, first - 0.5) << r.output;
    auto g = run_command(lmtrain_binary() + " generate --checkpoint " + run +
                         "/checkpoints/latest --prompt 'The cat' --max_new_tokens 20 --seed 1");
    ASSERT_EQ(g.exit_code, 0) << g.output;
    EXPECT_GT(g.output.size(), 10u);
    if (name != "mistral") continue;
    EXPECT_NE(r.output.find("sliding windows 8"), std::string::npos) << r.output;
    // Every layer reads the last 8 keys: a streaming cache of 7 tokens and no sinks generates
    // what the exact cache does.
    const std::string greedy = " generate --checkpoint " + run +
                               "/checkpoints/latest --prompt 'The cat' --max_new_tokens 24"
                               " --temperature 0 --stop_at_eot=false --print_ids";
    auto full = run_command(lmtrain_binary() + greedy);
    auto bounded =
        run_command(lmtrain_binary() + greedy + " --kv_cache=streaming:sinks=0,window=7");
    ASSERT_EQ(full.exit_code, 0) << full.output;
    ASSERT_EQ(bounded.exit_code, 0) << bounded.output;
    EXPECT_EQ(full.output, bounded.output);
  }
}

}  // namespace
}  // namespace lmtrain::testing
