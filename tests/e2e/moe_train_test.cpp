// MoE training end to end with real processes: 2 data-parallel ranks, expert parallelism (ep=2
// on 2 ranks, ep=2 x 2 replicas on 4, with ZeRO-1/2) and resumes across ep values (ZeRO state
// included) equal one rank on the same
// global batch (the global expert load drives the balancing bias identically everywhere), a
// resumed run equals an uninterrupted one (the bias is saved with the weights), metrics.jsonl
// carries the per-layer MoE statistics, and bad MoE settings or a checkpoint with another
// expert count are refused naming the keys.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_store.h"
#include "core/safetensors.h"
#include "e2e/corpus.h"
#include "e2e/dist_harness.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

namespace fs = std::filesystem;

class MoeTrainTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("lmtrain_moe_train");
    data_ = prepare_synthetic_data(dir_->path());
    baseline_ = dir_->file("one_rank");
    auto r = run_command(lmtrain_binary() + " train" + flags(baseline_));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { delete dir_; }

  // The 2-layer MoE model of tiny_moe_flags() (e2e/corpus.h).
  static std::string flags(const std::string& run) {
    return tiny_moe_flags() + " --data.dir=" + data_ + " --run.dir=" + run +
           " --train.max_steps=10 --dist.bucket_mb=0.02 --optim.eps=1e-6";
  }
  static std::string launch(int nproc) {
    return lmtrain_binary() + " launch --nproc_per_node=" + std::to_string(nproc) +
           " --master_port=" + std::to_string(free_port()) + " -- train";
  }
  // Through the store: an expert-parallel checkpoint's model.safetensors is assembled from its
  // shards (checkpoint/sharded_save.h).
  static at::Tensor tensor(const std::string& run, const std::string& name) {
    auto ckpt =
        train::CheckpointStore::load(run + "/checkpoints/latest", false, {"model.safetensors"});
    const auto& f = ckpt.files.at("model.safetensors");
    auto it = f.tensors.find(name);
    EXPECT_NE(it, f.tensors.end()) << name;
    return it == f.tensors.end() ? at::Tensor() : it->second;
  }

  static TempDir* dir_;
  static std::string data_, baseline_;
};
TempDir* MoeTrainTest::dir_ = nullptr;
std::string MoeTrainTest::data_, MoeTrainTest::baseline_;

TEST_F(MoeTrainTest, TwoDataParallelRanksEqualOneRank) {
  const std::string run = dir_->file("two_ranks");
  auto r = run_command(launch(2) + flags(run));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_LE(max_param_rel_diff(run + "/checkpoints/latest", baseline_ + "/checkpoints/latest"),
            1e-5);
  // The bias moved (the router is not perfectly balanced) and moved alike.
  auto bias = tensor(run, "transformer.h.0.mlp.expert_bias");
  ASSERT_TRUE(bias.defined());
  EXPECT_GT(bias.abs().max().item<double>(), 0.0);
  EXPECT_TRUE(bias.equal(tensor(baseline_, "transformer.h.0.mlp.expert_bias")));
}

// The seeds' `train_distributed.py --use_spawn`: `train --nproc_per_node=2` starts its ranks.
TEST_F(MoeTrainTest, TrainStartsItsOwnRanksLikeSpawnAndEqualsOneRank) {
  const std::string run = dir_->file("spawned");
  auto r = run_command(lmtrain_binary() + " train --nproc_per_node=2 --use_spawn" + flags(run));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("starting ranks 0..1 of 2"), std::string::npos) << r.output;
  EXPECT_LE(max_param_rel_diff(run + "/checkpoints/latest", baseline_ + "/checkpoints/latest"),
            1e-5);
}

// --model_type=pikv|standard picks the MoE preset or its dense twin (before any --config).
TEST_F(MoeTrainTest, ModelTypePicksTheMoeOrTheDensePreset) {
  const std::string tiny =
      " --data.dir=" + data_ +
      " --model.n_layer=1 --model.n_embd=32 --model.block_size=32 --data.seq_len=32"
      " --train.micro_batch_size=2 --train.total_batch_size=64 --train.max_steps=1"
      " --train.eval_every=0 --train.threads=1";
  for (const auto& [type, experts] :
       std::vector<std::pair<std::string, std::string>>{{"pikv", "8"}, {"standard", "0"}}) {
    const std::string run = dir_->file("model_type_" + type);
    auto r =
        run_command(lmtrain_binary() + " train --model_type=" + type + tiny + " --run.dir=" + run);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::string yaml = read_text(run + "/config.yaml");
    EXPECT_NE(yaml.find("moe.num_experts: " + experts), std::string::npos) << yaml;
  }
  auto bad = run_command(lmtrain_binary() + " train --model_type=huge" + tiny +
                         " --run.dir=" + dir_->file("model_type_bad"));
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--model_type='huge'"), std::string::npos) << bad.output;
}

// Expert parallelism: 2 ranks splitting the 4 experts (ep=2), and 4 ranks as 2 data-parallel
// replicas of ep=2, equal one process on the same global batch (dropless); the checkpoint holds
// every expert (each EP rank's in its own file).
TEST_F(MoeTrainTest, ExpertParallelRunsEqualOneRank) {
  struct Case {
    int nproc;
    std::string name, extra;
  };
  for (const auto& c : std::vector<Case>{
           {2, "ep2", ""},
           {4, "ep2_dp2", " --train.micro_batch_size=4"},
           // gradient accumulation (2 micro-steps) and recomputed blocks, whose backward
           // exchanges tokens again
           {2, "ep2_accum_ckpt",
            " --train.micro_batch_size=4 --train.activation_checkpointing=block"},
           // ZeRO shards the shared region over the world; the experts keep their state
           {2, "ep2_zero1", " --dist.zero=1"},
           {4, "ep2_dp2_zero2", " --train.micro_batch_size=4 --dist.zero=2"},
       }) {
    SCOPED_TRACE(c.name);
    const std::string run = dir_->file(c.name);
    auto r = run_command(launch(c.nproc) + flags(run) + " --dist.ep=2" + c.extra);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const double diff =
        max_param_rel_diff(run + "/checkpoints/latest", baseline_ + "/checkpoints/latest");
    std::cout << c.name << ": max relative parameter difference vs one process " << diff << "\n";
    EXPECT_LE(diff, 1e-5);
    EXPECT_EQ(tensor(run, "transformer.h.0.mlp.experts.c_fc.weight").size(0), 4);
    EXPECT_NE(read_text(run + "/train.log").find("ep=2, this rank holds experts [0, 2) of 4"),
              std::string::npos);
    EXPECT_NE(read_text(run + "/metrics.jsonl").find("\"a2a_ms\""), std::string::npos);
  }
}

// A checkpoint written at one ep resumes at another (the experts and their AdamW state are
// resharded), and the result still equals the uninterrupted single process.
TEST_F(MoeTrainTest, ResumeAtAnotherEpEqualsUninterrupted) {
  const std::string run = dir_->file("ep_resume");
  auto first = run_command(launch(2) + flags(run) + " --dist.ep=2 --train.stop_at_step=4");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  auto second =
      run_command(launch(4) + flags(run) +
                  " --dist.ep=4 --train.micro_batch_size=4 --train.stop_at_step=7 --resume=auto");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  // Each ep=4 rank reads only its expert's rows of the ep=2 slices (train/expert_resume.h).
  EXPECT_NE(second.output.find("reads only its own experts' rows of the saved stacks"),
            std::string::npos)
      << second.output;
  auto third = run_command(lmtrain_binary() + " train" + flags(run) + " --resume=auto");
  ASSERT_EQ(third.exit_code, 0) << third.output;
  EXPECT_LE(max_param_rel_diff(run + "/checkpoints/latest", baseline_ + "/checkpoints/latest"),
            1e-5);
}

// The same with ZeRO: state sharded at ep=2 with ZeRO-2 on 2 ranks, resumed at ep=4 with
// ZeRO-1 on 4 ranks, then by one process with the replicated AdamW.
TEST_F(MoeTrainTest, ZeroStateResumesAtAnotherEpAndWorldSize) {
  const std::string run = dir_->file("ep_zero_resume");
  auto first =
      run_command(launch(2) + flags(run) + " --dist.ep=2 --dist.zero=2 --train.stop_at_step=4");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  // Rank 0's optimizer file holds the shards' rank-0 part, no expert's state: each EP rank's
  // experts' moments are in its own optim.ep<e> (checkpoint/sharded_save.h).
  auto optim = core::read_safetensors(run + "/checkpoints/latest/optim.rank0.safetensors");
  EXPECT_FALSE(optim.tensors.count("exp_avg.transformer.h.0.mlp.experts.c_fc.weight"));
  EXPECT_TRUE(optim.tensors.count("exp_avg"));
  for (const char* f : {"optim.ep0.safetensors", "optim.ep1.safetensors"}) {
    EXPECT_TRUE(core::read_safetensors(run + "/checkpoints/latest/" + f).tensors.count("exp_avg"))
        << f;
  }
  auto second = run_command(launch(4) + flags(run) +
                            " --dist.ep=4 --dist.zero=1 --train.micro_batch_size=4"
                            " --train.stop_at_step=7 --resume=auto");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  auto third = run_command(lmtrain_binary() + " train" + flags(run) + " --resume=auto");
  ASSERT_EQ(third.exit_code, 0) << third.output;
  EXPECT_LE(max_param_rel_diff(run + "/checkpoints/latest", baseline_ + "/checkpoints/latest"),
            1e-5);
}

TEST_F(MoeTrainTest, ResumedRunEqualsUninterrupted) {
  const std::string run = dir_->file("resumed");
  auto first = run_command(lmtrain_binary() + " train" + flags(run) + " --train.stop_at_step=4");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  auto second = run_command(lmtrain_binary() + " train" + flags(run) + " --resume=auto");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_EQ(max_param_rel_diff(run + "/checkpoints/latest", baseline_ + "/checkpoints/latest"),
            0.0);
  EXPECT_TRUE(tensor(run, "transformer.h.1.mlp.expert_bias")
                  .equal(tensor(baseline_, "transformer.h.1.mlp.expert_bias")));
}

TEST_F(MoeTrainTest, MetricsCarryPerLayerLoadDropsAndLosses) {
  std::ifstream in(baseline_ + "/metrics.jsonl");
  std::string line;
  int records = 0;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (!j.contains("loss")) continue;
    ASSERT_TRUE(j.contains("moe")) << line;
    ASSERT_EQ(j["moe"].size(), 2u) << line;
    for (const auto& layer : j["moe"]) {
      const double lo = layer["load_min"], hi = layer["load_max"];
      EXPECT_LE(lo, 0.25 + 1e-12);  // 4 experts: the smallest share is at most even
      EXPECT_GE(hi, 0.25 - 1e-12);
      EXPECT_GE(layer["load_cv"].get<double>(), 0.0);
      EXPECT_EQ(layer["dropped"].get<double>(), 0.0);  // dropless
      EXPECT_GT(layer["z_loss"].get<double>(), 0.0);
      EXPECT_GT(layer["aux_loss"].get<double>(), 0.0);  // computed for the log even at coef 0
    }
    ++records;
  }
  EXPECT_EQ(records, 10);
}

TEST_F(MoeTrainTest, BadSettingsAndAnotherExpertCountAreRefusedNamingTheKeys) {
  const std::string run = dir_->file("bad");
  auto r = run_command(lmtrain_binary() + " train" + flags(run) + " --model.moe.top_k=5");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("model.moe.top_k"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("model.moe.num_experts"), std::string::npos) << r.output;

  r = run_command(launch(2) + flags(run) + " --dist.ep=2 --model.moe.num_experts=3");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("'model.moe.num_experts' = 3 is not divisible by 'dist.ep' = 2"),
            std::string::npos)
      << r.output;
  r = run_command(launch(2) + flags(run) + " --dist.ep=2 --optim.name=muon");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("dist.ep > 1 works with optim.name=adamw"), std::string::npos)
      << r.output;
  r = run_command(lmtrain_binary() + " train" + flags(run) + " --dist.ep=2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("'dist.ep' = 2 must divide the world size 1"), std::string::npos)
      << r.output;

  r = run_command(lmtrain_binary() + " train" + flags(run) + " --model.moe.every=3");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("model.moe.every"), std::string::npos) << r.output;

  const std::string copy = dir_->file("other_experts");
  fs::copy(baseline_, copy, fs::copy_options::recursive);
  r = run_command(lmtrain_binary() + " train" + flags(copy) +
                  " --model.moe.num_experts=8 --resume=auto --train.max_steps=12");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("moe.num_experts: checkpoint has 4, config has 8"), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace lmtrain::testing
