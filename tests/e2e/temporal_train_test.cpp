// Temporal-encoder runs (issue 26) with the real binary on real files: `lmtrain temporal-data`
// writes synthetic curves with questions, a tiny LM is first trained on the questions' text
// alone (the answer format and the class priors: a CPU stand-in for Qwen2.5), then an encoder is
// aligned to it, frozen. Checks: the answer loss falls and the LM stays bitwise unchanged (its
// weights are never copied into the run's checkpoints, which name it by path and sha256), resume
// is bitwise, 2 ranks equal 1 rank, online generation equals the cached samples, and bad
// settings are refused naming the key.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/safetensors.h"
#include "core/sha256.h"
#include "e2e/dist_harness.h"
#include "e2e/temporal_fixture.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

namespace fs = std::filesystem;

nlohmann::json checkpoint_meta(const std::string& ckpt) {
  return nlohmann::json::parse(read_text(ckpt + "/meta.json"));
}

std::vector<nlohmann::json> eval_records(const std::string& run_dir) {
  std::vector<nlohmann::json> out;
  std::ifstream in(run_dir + "/metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("val_loss")) out.push_back(j);
  }
  return out;
}

class TemporalTrain : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    fixture_ = new TemporalFixture;
    fixture_->build("lmtrain_temporal");
    dir_ = fixture_->dir.get();
    samples_ = fixture_->samples;
    lm_ = fixture_->lm;
    lm_hash_ = fixture_->lm_hash;
  }
  static void TearDownTestSuite() { delete fixture_; }

  static std::string flags(const std::string& run, int64_t steps) {
    return fixture_->flags(run, steps);
  }
  static CommandResult train(const std::string& run, int64_t steps, const std::string& extra = "") {
    return run_command(lmtrain_binary() + " train" + flags(run, steps) + extra);
  }

  static TemporalFixture* fixture_;
  static TempDir* dir_;
  static std::string samples_, lm_, lm_hash_;
};
TemporalFixture* TemporalTrain::fixture_ = nullptr;
TempDir* TemporalTrain::dir_ = nullptr;
std::string TemporalTrain::samples_, TemporalTrain::lm_, TemporalTrain::lm_hash_;

TEST_F(TemporalTrain, TrainsTheEncoderAndLeavesTheLmUntouched) {
  const std::string run = dir_->file("run"), still = dir_->file("run_lr0");
  auto r = train(run, 24);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "samples/s")) << r.output;
  auto r0 = train(still, 24, " --optim.lr=0");
  ASSERT_EQ(r0.exit_code, 0) << r0.output;
  // The answer loss on the held-out samples falls from where the initial encoder stands.
  const double trained = eval_records(run).back()["val_loss"].get<double>();
  const double initial = eval_records(still).back()["val_loss"].get<double>();
  EXPECT_LT(trained, initial - 0.1) << "trained " << trained << ", at lr 0 " << initial;

  // The LM is bitwise the same file, the checkpoint names it and holds none of its weights.
  EXPECT_EQ(core::sha256_file_hex(lm_ + "/checkpoints/latest/model.safetensors"), lm_hash_);
  const std::string ckpt = run + "/checkpoints/latest";
  const auto meta = checkpoint_meta(ckpt);
  EXPECT_EQ(meta["lora_base"]["sha256"].get<std::string>(), lm_hash_);
  EXPECT_EQ(meta["lora_base"]["path"].get<std::string>(),
            fs::canonical(lm_ + "/checkpoints/latest").string());
  for (const auto& name : core::read_safetensors(ckpt + "/model.safetensors").names) {
    EXPECT_EQ(name.find(".weight"), std::string::npos) << "LM weight copied: " << name;
  }
  const auto encoder = core::read_safetensors(ckpt + "/objective.safetensors").names;
  EXPECT_NE(std::find(encoder.begin(), encoder.end(), "patch_embed.weight"), encoder.end())
      << "no encoder in the checkpoint";
  // Each log line reports samples/s, and metrics.jsonl records it.
  EXPECT_TRUE(contains(read_text(run + "/metrics.jsonl"), "\"samples_per_s\""));
}

TEST_F(TemporalTrain, ResumedRunIsBitwiseTheUninterruptedOne) {
  const std::string whole = dir_->file("whole"), split = dir_->file("split");
  ASSERT_EQ(train(whole, 10).exit_code, 0);
  auto r = train(split, 10, " --train.stop_at_step=5");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = train(split, 10, " --resume=auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto a = checkpoint_meta(whole + "/checkpoints/latest"),
             b = checkpoint_meta(split + "/checkpoints/latest");
  EXPECT_EQ(b["step"], 10);
  EXPECT_EQ(a["files"]["objective.safetensors"]["sha256"],
            b["files"]["objective.safetensors"]["sha256"]);
  EXPECT_EQ(a["files"]["optim.rank0.safetensors"]["sha256"],
            b["files"]["optim.rank0.safetensors"]["sha256"]);
}

TEST_F(TemporalTrain, TwoRanksEqualOneRank) {
  const std::string one = dir_->file("one"), two = dir_->file("two");
  // eps 1e-6: Adam at 1e-8 turns fp32 noise in near-zero gradients into full-lr steps of random
  // sign (DEVELOPERS.md, "Tests").
  auto r = train(one, 6, " --optim.eps=1e-6");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_command(lmtrain_binary() + " launch --nproc_per_node=2 --master_port=" +
                  std::to_string(free_port()) + " -- train" + flags(two, 6) +
                  " --optim.eps=1e-6 --train.micro_batch_size=4");  // the same 8 rows per step
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto l1 = logged_losses(one), l2 = logged_losses(two);
  ASSERT_EQ(l1.size(), 6u);
  ASSERT_EQ(l2.size(), 6u);
  EXPECT_NEAR(l1[0], l2[0], 1e-5);
  EXPECT_NEAR(l1.back(), l2.back(), 1e-4);
  // fp32 summation order, amplified by 6 Adam steps at lr 3e-3, leaves ~3e-4 (one rank's own
  // micro-batch of 8 against 2 accumulated micro-batches of 4 differ as much); a rank whose
  // gradients were not averaged in would be off by about lr / scale = 4e-2.
  EXPECT_LT(max_param_rel_diff(one + "/checkpoints/latest", two + "/checkpoints/latest",
                               "objective.safetensors"),
            1e-3);
}

TEST_F(TemporalTrain, OnlineGenerationEqualsTheCachedSamples) {
  const std::string cached = dir_->file("cached"), online = dir_->file("online");
  ASSERT_EQ(train(cached, 4).exit_code, 0);
  auto r = train(online, 4,
                 " --data.temporal.dir= --data.temporal.online=true --data.temporal.seed=5"
                 " --data.temporal.num_samples=480 --data.temporal.lengths=48,64"
                 " --data.temporal.tasks=trend,seasonality,spikes");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(
      checkpoint_meta(cached + "/checkpoints/latest")["files"]["objective.safetensors"]["sha256"],
      checkpoint_meta(online + "/checkpoints/latest")["files"]["objective.safetensors"]["sha256"]);
}

TEST_F(TemporalTrain, BadSettingsAreRefusedNamingTheKey) {
  const std::string run = dir_->file("bad");
  const std::string bin = lmtrain_binary() + " train";
  expect_refused(run_command(bin + flags(run, 2) + " --model.init_from="),
                 {"model.init_from", "frozen LM"});
  expect_refused(run_command(bin + flags(run, 2) + " --distill.enabled=true"),
                 {"model.temporal.enabled", "distill.enabled"});
  expect_refused(run_command(bin + flags(run, 2) + " --data.temporal.online=true"),
                 {"data.temporal.online", "data.temporal.dir"});
  expect_refused(run_command(bin + flags(run, 2) + " --data.temporal.dir="),
                 {"data.temporal.dir", "data.temporal.online"});
  expect_refused(run_command(bin + flags(run, 2) + " --data.seq_len=16"), {"data.seq_len"});
  expect_refused(run_command(bin + flags(run, 2) + " --model.n_layer=3"),
                 {"model.n_layer", "model.init_from"});
  expect_refused(run_command(bin + flags(run, 2) + " --model.temporal.max_length=32"),
                 {"max_length"});
  expect_refused(run_command(bin + flags(run, 2) + " --model.temporal.channels=2"), {"channel"});
}

}  // namespace
}  // namespace lmtrain::testing
