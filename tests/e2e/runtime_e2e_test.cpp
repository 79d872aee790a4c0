// The runtime features end to end on the CPU, through the binary: bf16 autocast training stays
// close to fp32; activation checkpointing under DDP hooks, ZeRO-2 and gradient accumulation
// equals the plain run; CUDA-only settings are clear usage errors (exit 2) on a CPU machine.
#include <gtest/gtest.h>

#include "e2e/corpus.h"
#include "e2e/dist_harness.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

class RuntimeE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("lmtrain_runtime");
    data_ = prepare_synthetic_data(dir_->path());
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string flags(const std::string& run) {
    return tiny_train_flags() + " --data.dir=" + data_ + " --run.dir=" + run +
           " --optim.eps=1e-6 --dist.bucket_mb=0.02";
  }
  static TempDir* dir_;
  static std::string data_;
};
TempDir* RuntimeE2eTest::dir_ = nullptr;
std::string RuntimeE2eTest::data_;

// Stated tolerance: over 50 steps every bf16 loss is within 0.01 (about 0.2% of the loss) of the
// fp32 loss at the same step, and bf16 learns as fp32 does (measured: 0.0005 at worst).
TEST_F(RuntimeE2eTest, Bf16LossCurveStaysWithinToleranceOfFp32Over50Steps) {
  const auto f32 = dir_->file("fp32"), b16 = dir_->file("bf16");
  auto a = run_command(lmtrain_binary() + " train" + flags(f32) + " --train.max_steps=50");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  auto b = run_command(lmtrain_binary() + " train" + flags(b16) +
                       " --train.max_steps=50 --train.precision=bf16");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_NE(b.output.find("fp32 master weights, BFloat16 compute"), std::string::npos) << b.output;
  const auto l32 = logged_losses(f32), l16 = logged_losses(b16);
  ASSERT_EQ(l32.size(), 50u);
  ASSERT_EQ(l16.size(), 50u);
  double worst = 0;
  for (size_t i = 0; i < l32.size(); ++i) worst = std::max(worst, std::abs(l16[i] - l32[i]));
  EXPECT_LE(worst, 0.01);
  EXPECT_LT(l16.back(), l16.front() - 0.5) << "bf16 did not learn";
  std::cout << "bf16 vs fp32 over 50 steps: worst |loss difference| " << worst << ", final "
            << l16.back() << " vs " << l32.back() << "\n";
}

TEST_F(RuntimeE2eTest, ActivationCheckpointingWithDdpZero2AndAccumulationEqualsPlainRun) {
  const auto plain = dir_->file("plain"), ckpt = dir_->file("ckpt");
  // Global batch 16 windows: 1 rank x 8 x 2 micro-steps; 2 ranks x 4 x 2 micro-steps.
  auto a = run_command(lmtrain_binary() + " train" + flags(plain) +
                       " --train.max_steps=8 --train.micro_batch_size=8");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  auto b = run_command(lmtrain_binary() + " launch --nproc_per_node=2 --master_port=" +
                       std::to_string(free_port()) + " -- train" + flags(ckpt) +
                       " --train.max_steps=8 --train.micro_batch_size=4 --dist.zero=2"
                       " --train.activation_checkpointing=block --model.dropout=0");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_LE(max_param_rel_diff(ckpt + "/checkpoints/latest", plain + "/checkpoints/latest"), 1e-5)
      << b.output;
  EXPECT_NEAR(last_logged_loss(ckpt), last_logged_loss(plain), 1e-5);
}

TEST_F(RuntimeE2eTest, Bf16GradientAllReduceStaysCloseToFp32AndIsRefusedWhereItCannotApply) {
  const auto one = dir_->file("reduce_one"), two = dir_->file("reduce_bf16");
  auto a = run_command(lmtrain_binary() + " train" + flags(one) +
                       " --train.max_steps=6 --train.micro_batch_size=8");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  auto launch = [] {
    return lmtrain_binary() +
           " launch --nproc_per_node=2 --master_port=" + std::to_string(free_port()) + " -- train";
  };
  auto b = run_command(launch() + flags(two) +
                       " --train.max_steps=6 --train.micro_batch_size=8"
                       " --train.grad_reduce_dtype=bf16");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_NE(b.output.find("gradients reduced in BFloat16"), std::string::npos) << b.output;
  // bf16 gradients (8 mantissa bits) move Adam's updates a little, never a lot.
  const double diff = max_param_rel_diff(two + "/checkpoints/latest", one + "/checkpoints/latest");
  EXPECT_GT(diff, 1e-7) << "no trace of bf16 rounding: was the reduction really in bf16?";
  EXPECT_LT(diff, 2e-2);
  // ZeRO-1 reduce-scatters its gradients (optim/zero_adamw.h): in bf16 too, each rank's shard
  // coming back into its fp32 buffer.
  const auto rs = dir_->file("reduce_scatter_bf16");
  auto z = run_command(launch() + flags(rs) +
                       " --train.max_steps=6 --train.micro_batch_size=8 --dist.zero=1"
                       " --train.grad_reduce_dtype=bf16");
  ASSERT_EQ(z.exit_code, 0) << z.output;
  const double rs_diff =
      max_param_rel_diff(rs + "/checkpoints/latest", one + "/checkpoints/latest");
  EXPECT_GT(rs_diff, 1e-7) << "no trace of bf16 rounding: was the reduction really in bf16?";
  EXPECT_LT(rs_diff, 2e-2);
  // DistMuon sends each matrix's gradient to its owner, packed: not lowered.
  auto c = run_command(launch() + flags(dir_->file("owners")) +
                       " --train.max_steps=1 --optim.name=muon --train.grad_reduce_dtype=bf16");
  EXPECT_NE(c.exit_code, 0);
  EXPECT_NE(c.output.find("train.grad_reduce_dtype=bf16"), std::string::npos) << c.output;
}

TEST_F(RuntimeE2eTest, CudaOnlySettingsAreUsageErrorsOnACpuMachine) {
  const auto run = dir_->file("errors");
  for (const std::string extra : {" --train.device=cuda", " --train.precision=fp16",
                                  " --dist.backend=nccl", " --train.cuda_graphs=true"}) {
    auto r = run_command(lmtrain_binary() + " train" + flags(run) + " --train.max_steps=1" + extra);
    EXPECT_EQ(r.exit_code, 2) << extra << "\n" << r.output;
    const auto key = extra.substr(3, extra.find('=') - 3);
    EXPECT_NE(r.output.find(key), std::string::npos) << extra << "\n" << r.output;
  }
  auto r = run_command(lmtrain_binary() + " train" + flags(run) +
                       " --train.max_steps=1 --train.activation_checkpointing=every:0");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("train.activation_checkpointing"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace lmtrain::testing
