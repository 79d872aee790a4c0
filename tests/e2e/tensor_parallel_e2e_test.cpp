// Tensor parallelism (dist.tp) with real processes over Gloo, against one process: TP=2 on 2
// ranks and TP=2 x ZeRO-3 on 4 ranks (2 data-parallel replicas, each sharding its slices) equal
// one process within float tolerance (loss within 1e-6 relative at every step, parameters within
// 1e-5 after 10 steps), a repeated TP run equal bit for bit, the model state per rank halved, and
// the refusals named by their keys. The flags are ZeRO-3's test's (blocks recomputed in
// backward, tied head, clipping that bites) on the same 2-layer, 2-head model.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "e2e/corpus.h"
#include "e2e/dist_harness.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

namespace fs = std::filesystem;

class TensorParallelE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("lmtrain_tp");
    data_ = prepare_synthetic_data(dir_->path());
    one_ = run("one", 1, 1, "");
  }
  static void TearDownTestSuite() { delete dir_; }

  static std::string flags(const std::string& run) {
    return tiny_train_flags() + " --data.dir=" + data_ + " --run.dir=" + run +
           " --train.total_batch_size=768 --train.max_steps=10 --dist.bucket_mb=0.02"
           " --optim.eps=1e-6 --train.activation_checkpointing=block --train.grad_clip=0.1";
  }
  // A run on `ranks` ranks with dist.tp = tp: world / tp replicas, each accumulating 2
  // micro-steps of 12 / replicas windows.
  static std::string run(const std::string& name, int ranks, int tp, const std::string& extra) {
    const std::string dir = dir_->file(name);
    const int replicas = ranks / tp;
    auto r = run_command(lmtrain_on_ranks(ranks, "train") + flags(dir) + extra +
                         " --dist.tp=" + std::to_string(tp) +
                         " --train.micro_batch_size=" + std::to_string(12 / replicas));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_TRUE(fs::exists(dir + "/checkpoints/latest")) << r.output;
    outputs_[name] = r.output;
    return dir;
  }

  static TempDir* dir_;
  static std::string data_, one_;
  static std::map<std::string, std::string> outputs_;
};
TempDir* TensorParallelE2eTest::dir_ = nullptr;
std::string TensorParallelE2eTest::data_, TensorParallelE2eTest::one_;
std::map<std::string, std::string> TensorParallelE2eTest::outputs_;

TEST_F(TensorParallelE2eTest, Tp2EqualsOneProcessAndRepeatsBitwise) {
  const std::string tp = run("tp2", 2, 2, "");
  const std::string& out = outputs_["tp2"];
  EXPECT_NE(out.find("tensor parallelism: tp=2"), std::string::npos) << out;
  expect_run_matches(tp, one_, 1e-6, 1e-5);
  const std::string again = run("tp2_again", 2, 2, "");
  EXPECT_EQ(max_param_rel_diff(again + "/checkpoints/latest", tp + "/checkpoints/latest"), 0.0);
  EXPECT_EQ(logged_losses(again), logged_losses(tp));
  // Each rank holds about half of the model state (the norms, biases of the row-parallel
  // layers and position table whole).
  const int64_t state = logged_count(out, "model_state_bytes_per_rank");
  const int64_t one_state = logged_count(outputs_["one"], "model_state_bytes_per_rank");
  ASSERT_GT(state, 0) << out;
  EXPECT_LT(state, one_state * 0.6) << out;
  EXPECT_GT(state, one_state * 0.5) << out;
}

TEST_F(TensorParallelE2eTest, Tp2TimesZero3OnFourRanksEqualsOneProcess) {
  const std::string run4 = run("tp2_z3", 4, 2, " --dist.zero=3");
  const std::string& out = outputs_["tp2_z3"];
  EXPECT_NE(out.find("2 data-parallel replica(s)"), std::string::npos) << out;
  EXPECT_NE(out.find("sharded over 2 ranks"), std::string::npos) << out;
  expect_run_matches(run4, one_, 1e-6, 1e-5);
}

TEST_F(TensorParallelE2eTest, WhatItCannotDoYetIsAClearError) {
  const std::vector<std::pair<std::string, std::string>> refused = {
      {" --dist.tp=2 --optim.name=muon", "'optim.name'"},
      {" --dist.tp=2 --lora.rank=4", "'lora.rank'"},
      {" --dist.tp=2 --model.moe.num_experts=4", "'model.moe.num_experts'"},
      {" --dist.tp=2 --train.fused_kernels=on", "'train.fused_kernels'"},
      {" --dist.tp=2 --data.document_mask=true", "'data.document_mask'"},
      {" --dist.tp=2", "'dist.tp' = 2 must divide the world of 1 ranks"},
  };
  for (const auto& [extra, message] : refused) {
    auto r = run_command(lmtrain_binary() + " train" + flags(dir_->file("refused")) + extra +
                         " --train.micro_batch_size=12");
    EXPECT_EQ(r.exit_code, 2) << extra << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << extra << "\n" << r.output;
  }
}

}  // namespace
}  // namespace lmtrain::testing
