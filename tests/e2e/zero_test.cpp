// Sharded AdamW (ZeRO-1/2) with real processes: equal to replicated AdamW at 1, 2, 3 and 4
// ranks (3 divides nothing in the model: the flat buffers are padded), resharding checkpoints
// across world sizes, and the per-rank optimizer state measured from the tensors.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "e2e/corpus.h"
#include "e2e/dist_harness.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

namespace fs = std::filesystem;

class ZeroTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("lmtrain_zero");
    data_ = prepare_synthetic_data(dir_->path());
    baseline_ = dir_->file("replicated");
    auto r = run_command(lmtrain_binary() + " train" + flags(baseline_) +
                         " --train.micro_batch_size=8 --dist.zero=0");
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { delete dir_; }

  // Global batch: 24 windows of 32 tokens, which 1, 2, 3 and 4 ranks all divide.
  // optim.eps=1e-6: see ddp_test.cpp (Adam and analytically-zero gradients).
  static std::string flags(const std::string& run) {
    return tiny_train_flags() + " --data.dir=" + data_ + " --run.dir=" + run +
           " --train.total_batch_size=768 --train.max_steps=10 --dist.bucket_mb=0.02"
           " --optim.eps=1e-6";
  }
  static std::string train(int ranks) {
    if (ranks == 1) return lmtrain_binary() + " train";
    return lmtrain_binary() + " launch --nproc_per_node=" + std::to_string(ranks) +
           " --master_port=" + std::to_string(free_port()) + " -- train";
  }
  static void expect_matches_baseline(const std::string& run, const std::string& output) {
    ASSERT_TRUE(fs::exists(run + "/checkpoints/latest")) << output;
    EXPECT_LE(max_param_rel_diff(run + "/checkpoints/latest", baseline_ + "/checkpoints/latest"),
              1e-5)
        << output;
    EXPECT_NEAR(last_logged_loss(run), last_logged_loss(baseline_), 1e-5) << output;
  }
  static void run_stage(int stage) {
    for (int ranks : {1, 2, 3, 4}) {
      SCOPED_TRACE("ZeRO-" + std::to_string(stage) + " at " + std::to_string(ranks) + " ranks");
      const std::string run =
          dir_->file("zero" + std::to_string(stage) + "_" + std::to_string(ranks));
      auto r = run_command(train(ranks) + flags(run) + " --dist.zero=" + std::to_string(stage) +
                           " --train.micro_batch_size=" + std::to_string(24 / ranks));
      ASSERT_EQ(r.exit_code, 0) << r.output;
      EXPECT_NE(r.output.find("optimizer: adamw-zero" + std::to_string(stage)), std::string::npos)
          << r.output;
      expect_matches_baseline(run, r.output);
    }
  }

  static TempDir* dir_;
  static std::string data_, baseline_;
};
TempDir* ZeroTest::dir_ = nullptr;
std::string ZeroTest::data_, ZeroTest::baseline_;

TEST_F(ZeroTest, Stage1At1To4RanksEqualsReplicatedAdamW) { run_stage(1); }

TEST_F(ZeroTest, Stage2At1To4RanksEqualsReplicatedAdamW) { run_stage(2); }

// Bytes sent per step (distributed/comm_bytes.h, ring accounting) at 2 ranks: ZeRO-1 reduce-
// scatters its gradients as ZeRO-2 does (optim/zero_adamw.h), so both send, per step, the
// padded flat buffer's (W-1)/W by reduce-scatter and as much again in the updated shards'
// broadcasts: together DDP's 2 (W-1)/W, no longer an all-reduce plus the broadcasts (1.47x).
// Only the loss sums and the gradient norm (a few doubles) are all-reduced. The first interval
// also holds the start-up broadcasts.
TEST_F(ZeroTest, Stage1SendsTheBytesOfStage2PerStep) {
  std::vector<std::vector<nlohmann::json>> by_stage;
  int64_t grad_bytes = 0;
  for (int stage : {1, 2}) {
    const std::string run = dir_->file("bytes_zero" + std::to_string(stage));
    auto r = run_command(train(2) + flags(run) + " --dist.zero=" + std::to_string(stage) +
                         " --train.micro_batch_size=12 --train.max_steps=4");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    grad_bytes = 4 * logged_count(read_text(run + "/train.log"), "trained_parameters");
    ASSERT_GT(grad_bytes, 0) << r.output;
    by_stage.push_back(step_records(run));
    ASSERT_EQ(by_stage.back().size(), 4u) << r.output;
  }
  for (size_t i = 1; i < 4; ++i) {
    const auto& one = by_stage[0][i]["comm_bytes"];
    const auto& two = by_stage[1][i]["comm_bytes"];
    EXPECT_EQ(one, two) << "step " << i + 1;
    const int64_t rs = one["reduce_scatter"].get<int64_t>();
    EXPECT_EQ(rs, one["broadcast"].get<int64_t>()) << one.dump();
    // Half the padded buffer each way at 2 ranks: the buffer is padded to 16 x 2 elements and
    // each tensor to 16, well under 2% of this model.
    EXPECT_GE(2 * rs, grad_bytes) << one.dump();
    EXPECT_LE(2 * rs, grad_bytes * 102 / 100) << one.dump();
    EXPECT_LE(one["all_reduce"].get<int64_t>(), 256) << one.dump();
  }
}

TEST_F(ZeroTest, ReshardingRoundTrip2To3To2RanksEqualsAnUnresizedRun) {
  const std::string run = dir_->file("resharded");
  auto a = run_command(train(2) + flags(run) +
                       " --dist.zero=2 --train.micro_batch_size=12 --train.stop_at_step=4");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  ASSERT_TRUE(fs::exists(run + "/checkpoints/latest/optim.rank1.safetensors")) << a.output;
  auto b = run_command(train(3) + flags(run) +
                       " --dist.zero=2 --train.micro_batch_size=8 --train.stop_at_step=7"
                       " --resume=auto");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  ASSERT_TRUE(fs::exists(run + "/checkpoints/latest/optim.rank2.safetensors")) << b.output;
  auto c = run_command(train(2) + flags(run) +
                       " --dist.zero=1 --train.micro_batch_size=12 --resume=auto");
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(c.output.find("resumed from"), std::string::npos) << c.output;
  expect_matches_baseline(run, a.output + b.output + c.output);
}

TEST_F(ZeroTest, DistMuonAt2And3RanksEqualsSingleProcessMuonAndReshards) {
  const std::string muon = " --optim.name=muon --optim.muon_momentum_warmup=5";
  const std::string one = dir_->file("muon1");
  auto base = run_command(train(1) + flags(one) + muon + " --train.micro_batch_size=8");
  ASSERT_EQ(base.exit_code, 0) << base.output;
  EXPECT_NE(base.output.find("optimizer: muon"), std::string::npos) << base.output;
  auto compare = [&](const std::string& run, const std::string& output) {
    EXPECT_LE(max_param_rel_diff(run + "/checkpoints/latest", one + "/checkpoints/latest"), 1e-5)
        << output;
    EXPECT_NEAR(last_logged_loss(run), last_logged_loss(one), 1e-5) << output;
  };
  for (int ranks : {2, 3}) {
    const std::string run = dir_->file("muon" + std::to_string(ranks));
    auto r = run_command(train(ranks) + flags(run) + muon +
                         " --train.micro_batch_size=" + std::to_string(24 / ranks));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    compare(run, r.output);
  }
  // Momentum lives on each matrix's owner; a 2-rank checkpoint resumed on 3 ranks hands every
  // matrix's momentum to its new owner.
  const std::string run = dir_->file("muon_resharded");
  auto a = run_command(train(2) + flags(run) + muon +
                       " --train.micro_batch_size=12 --train.stop_at_step=5");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  auto b = run_command(train(3) + flags(run) + muon + " --train.micro_batch_size=8 --resume=auto");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  compare(run, a.output + b.output);
}

TEST_F(ZeroTest, MuonWithZeroIsAClearError) {
  auto r = run_command(train(1) + flags(dir_->file("muon_zero")) +
                       " --optim.name=muon --dist.zero=1 --train.micro_batch_size=8");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("dist.zero applies to optim.name=adamw"), std::string::npos) << r.output;
}

int64_t state_bytes(const std::string& output) {
  return logged_count(output, "optimizer_state_bytes_per_rank");
}

// The step's CPU time (bench's step_thread_cpu_ms) is the step thread's alone: positive and
// never more than the step's wall time; a multi-rank step also spends CPU on other threads
// (Gloo's), other_threads_cpu_ms.
void expect_cpu_split(const std::string& output, bool several_ranks) {
  const double wall = logged_number(output, "ms_per_step"),
               step = logged_number(output, "step_thread_cpu_ms"),
               other = logged_number(output, "other_threads_cpu_ms");
  EXPECT_GT(step, 0) << output;
  EXPECT_LE(step, wall * 1.01 + 0.1) << output;
  EXPECT_GE(other, 0) << output;
  if (several_ranks) {
    EXPECT_GT(other, 0) << output;
  }
}

TEST_F(ZeroTest, PerRankStateIsAtMostOneNthPlusFivePercentAndCpuTimeIsReported) {
  const std::string bench = " bench --config " + source_dir() +
                            "/configs/gpt2-tiny.yaml --model.vocab_size=2048"
                            " --train.micro_batch_size=1 --train.total_batch_size=0"
                            " --data.seq_len=32 --bench.steps=1 --bench.warmup=0 --train.threads=1";
  auto full = run_command(lmtrain_binary() + bench + " --dist.zero=0");
  ASSERT_EQ(full.exit_code, 0) << full.output;
  const int64_t unsharded = state_bytes(full.output);
  ASSERT_GT(unsharded, 0) << full.output;
  expect_cpu_split(full.output, false);
  for (int ranks : {2, 3, 4}) {
    auto r = run_command(lmtrain_binary() + " launch --nproc_per_node=" + std::to_string(ranks) +
                         " --master_port=" + std::to_string(free_port()) + " --" + bench +
                         " --dist.zero=1");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const int64_t per_rank = state_bytes(r.output);
    EXPECT_GT(per_rank, 0) << r.output;
    EXPECT_LE(per_rank, unsharded / ranks * 1.05) << ranks << " ranks";
    expect_cpu_split(r.output, true);
  }
}

}  // namespace
}  // namespace lmtrain::testing
