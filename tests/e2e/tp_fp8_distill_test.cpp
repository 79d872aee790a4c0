// train.precision=fp8 and distillation under tensor parallelism (dist.tp = 2 on 2 Gloo ranks)
// against one process, on tensor_parallel_e2e_test's tiny model and flags:
//  - fp8: the split layers take the whole tensors' scales (parallel/tp_fp8.h), so TP=2 fp8
//    equals one process fp8 up to fp32 summation order and the bf16 / fp8 roundings it tips:
//    no further than one process is from itself under another order of summation;
//  - distillation: the vocabulary-parallel loss (parallel/vocab_parallel_distill.h) with a
//    replicated teacher equals one process (loss within 1e-6 relative every step, parameters
//    within 1e-5), and a run stopped at step 5 resumes bit for bit;
//  - what is still refused under TP is a clear error naming its key.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <utility>

#include "e2e/corpus.h"
#include "e2e/dist_harness.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

namespace fs = std::filesystem;

class TpFp8DistillTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("lmtrain_tp_fp8_distill");
    data_ = prepare_synthetic_data(dir_->path());
  }
  static void TearDownTestSuite() { delete dir_; }

  static std::string flags(const std::string& run) {
    return tiny_train_flags() + " --data.dir=" + data_ + " --run.dir=" + run +
           " --train.total_batch_size=768 --train.micro_batch_size=12 --dist.bucket_mb=0.02"
           " --optim.eps=1e-6 --train.activation_checkpointing=block --train.grad_clip=0.1";
  }
  // A run of `steps` steps on `ranks` ranks with dist.tp = ranks.
  static std::string run(const std::string& name, int ranks, const std::string& extra,
                         int steps = 10) {
    const std::string dir = dir_->file(name);
    auto r = run_command(lmtrain_on_ranks(ranks, "train") + flags(dir) + extra +
                         " --train.max_steps=" + std::to_string(steps) +
                         " --dist.tp=" + std::to_string(ranks));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_TRUE(fs::exists(dir + "/checkpoints/latest")) << r.output;
    return dir;
  }
  // (max over steps of the loss's relative difference, max_param_rel_diff) of `run` from
  // `base`, printed.
  static std::pair<double, double> diffs(const std::string& run, const std::string& base) {
    const auto l = logged_losses(run), want = logged_losses(base);
    EXPECT_EQ(l.size(), want.size()) << run;
    double loss = 0;
    for (size_t i = 0; i < l.size() && i < want.size(); ++i)
      loss = std::max(loss, std::abs(l[i] - want[i]) / std::abs(want[i]));
    const double params =
        max_param_rel_diff(run + "/checkpoints/latest", base + "/checkpoints/latest");
    std::printf("%s: loss max rel diff %.3g, params max rel diff %.3g\n", run.c_str(), loss,
                params);
    return {loss, params};
  }

  static TempDir* dir_;
  static std::string data_;
};
TempDir* TpFp8DistillTest::dir_ = nullptr;
std::string TpFp8DistillTest::data_;

// fp8 turns fp32 summation order into visible differences: a bf16 rounding it tips can tip an
// fp8 rounding (e4m3's step is 1/16 relative, e5m2's 1/8) and Adam turns a small gradient's
// changed sign into a whole step. So TP=2 is held to one process's own noise floor: one process
// with 4 micro-steps of 6 windows instead of 2 of 12 (the same global batch, another summation
// order) differs from it by as much (measured: loss 1.2e-4 relative, parameters 0.105 of each
// tensor's largest value, against TP=2's 1.1e-4 and 0.079; bf16 TP=2: 2.5e-5 and 0.007). The
// first step's loss, a forward only, is held to 2e-5 (measured 8.2e-6).
TEST_F(TpFp8DistillTest, Fp8Tp2EqualsOneProcessFp8UpToItsSummationOrderNoise) {
  const std::string fp8 = " --train.precision=fp8";
  const std::string one = run("fp8_one", 1, fp8), tp = run("fp8_tp2", 2, fp8);
  const std::string reordered = run("fp8_one_mb6", 1, fp8 + " --train.micro_batch_size=6");
  const auto [tp_loss, tp_params] = diffs(tp, one);
  const auto [floor_loss, floor_params] = diffs(reordered, one);
  EXPECT_LE(tp_loss, 2 * floor_loss);
  EXPECT_LE(tp_params, 2 * floor_params);
  const auto l = logged_losses(tp), want = logged_losses(one);
  ASSERT_EQ(l.size(), want.size());
  EXPECT_LE(std::abs(l[0] - want[0]), 2e-5 * want[0]);
}

TEST_F(TpFp8DistillTest, DistillTp2EqualsOneProcessAndResumesBitwise) {
  // A wider teacher (64), trained briefly on one process.
  const std::string teacher = run("teacher", 1, " --model.n_embd=64", 6);
  const std::string distill = " --distill.enabled=true --distill.teacher=" + teacher +
                              " --distill.alpha=0.5 --distill.temperature=2";
  const std::string one = run("distill_one", 1, distill), tp = run("distill_tp2", 2, distill);
  diffs(tp, one);
  expect_run_matches(tp, one, 1e-6, 1e-5);
  // Stopped at step 5 and resumed in the same layout: bit for bit the uninterrupted run.
  const std::string at5 = run("distill_tp2_at5", 2, distill + " --train.stop_at_step=5");
  const std::string resumed = dir_->file("distill_tp2_resumed");
  fs::copy(at5, resumed, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  auto r = run_command(lmtrain_on_ranks(2, "train") + flags(resumed) + distill +
                       " --train.max_steps=10 --dist.tp=2 --resume=auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
  const std::string a = resumed + "/checkpoints/latest", b = tp + "/checkpoints/latest";
  EXPECT_EQ(max_param_rel_diff(a, b), 0.0);
  EXPECT_EQ(max_param_rel_diff(a, b, "optim.rank1.safetensors"), 0.0);
  EXPECT_EQ(logged_losses(resumed), logged_losses(tp));
}

TEST_F(TpFp8DistillTest, WhatTpStillRefusesIsAClearError) {
  const std::string distill = " --distill.enabled=true --distill.teacher=" + dir_->file("none");
  const std::vector<std::pair<std::string, std::string>> refused = {
      {" --train.precision=fp8 --lora.rank=4", "'train.precision' = fp8 with 'lora.rank'"},
      {distill + " --distill.top_k=8", "'distill.top_k' > 0"},
      {distill + " --distill.cache=" + dir_->file("cache"), "'distill.cache'"},
      {distill + " --distill.feature_layers=1", "'distill.feature_layers'"},
  };
  for (const auto& [extra, message] : refused) {
    // One process asking for dist.tp = 2: these refusals come before the world size's.
    auto r = run_command(lmtrain_binary() + " train" + flags(dir_->file("refused")) + extra +
                         " --train.max_steps=1 --dist.tp=2");
    EXPECT_EQ(r.exit_code, 2) << extra << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << extra << "\n" << r.output;
  }
}

}  // namespace
}  // namespace lmtrain::testing
