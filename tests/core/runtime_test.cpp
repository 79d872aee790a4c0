// The runtime seam on a machine without a GPU (the main suite hides GPUs, see
// tests/CMakeLists.txt): device resolution, the clear errors, and what bf16 autocast does on CPU.
#include "core/runtime.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "cli/dist_setup.h"
#include "core/config.h"
#include "core/error.h"

namespace lmtrain::core {
namespace {

std::string runtime_usage_error(Config cfg) {
  try {
    cli::read_runtime(cfg, 0);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(Runtime, AutoIsCpuWithoutAGpuAndFp32ByDefault) {
  ASSERT_FALSE(cuda_available());
  const auto rt = cli::read_runtime(Config::defaults(), 0);
  EXPECT_TRUE(rt.device.is_cpu());
  EXPECT_EQ(rt.compute_dtype, at::kFloat);
  EXPECT_EQ(rt.param_dtype, at::kFloat);
  EXPECT_FALSE(rt.autocast());
  EXPECT_FALSE(rt.loss_scaling());
}

TEST(Runtime, CudaWithoutAVisibleGpuIsAUsageErrorNamingTheKey) {
  auto cfg = Config::defaults();
  cfg.set("train.device", "cuda", "test");
  const auto msg = runtime_usage_error(cfg);
  EXPECT_NE(msg.find("train.device=cuda"), std::string::npos) << msg;
  EXPECT_NE(msg.find(built_with_cuda() ? "no GPU is visible" : "without CUDA"), std::string::npos)
      << msg;
}

TEST(Runtime, Fp16OnCpuIsAUsageError) {
  auto cfg = Config::defaults();
  cfg.set("train.precision", "fp16", "test");
  const auto msg = runtime_usage_error(cfg);
  EXPECT_NE(msg.find("train.precision=fp16 needs CUDA"), std::string::npos) << msg;
}

TEST(Runtime, Bf16KeepsFp32MasterWeightsAndComputesInBf16) {
  auto cfg = Config::defaults();
  cfg.set("train.precision", "bf16", "test");
  cfg.set("train.grad_reduce_dtype", "bf16", "test");
  const auto rt = cli::read_runtime(cfg, 0);
  EXPECT_EQ(rt.param_dtype, at::kFloat);
  EXPECT_EQ(rt.compute_dtype, at::kBFloat16);
  EXPECT_EQ(rt.reduce_dtype, at::kBFloat16);
  EXPECT_TRUE(rt.autocast());
  EXPECT_NE(rt.describe().find("bf16"), std::string::npos) << rt.describe();

  // Under the scope a linear layer computes in bf16 from fp32 weights; outside it, in fp32.
  auto w = torch::randn({8, 4}, torch::requires_grad());
  auto x = torch::randn({2, 4});
  at::Tensor y;
  {
    AutocastScope scope(rt);
    y = torch::linear(x, w);
  }
  EXPECT_EQ(y.scalar_type(), at::kBFloat16);
  EXPECT_EQ(torch::linear(x, w).scalar_type(), at::kFloat);
  y.sum().backward();
  EXPECT_EQ(w.grad().scalar_type(), at::kFloat);  // gradients reach the fp32 master weights
}

TEST(Runtime, ForDeviceRejectsUnknownNames) {
  try {
    Runtime::for_device("tpu", "--device");
    FAIL() << "accepted --device=tpu";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--device = 'tpu'"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(Runtime::for_device("cpu", "--device").device.is_cpu());
  // eval and generate compute in exact fp32, also on a GPU (train.tf32 is training's key).
  EXPECT_FALSE(Runtime::for_device("cpu", "--device").tf32);
}

// Rank r takes cuda:r; a process that sees one GPU (bound to it by srun --gpus-per-task or a
// per-rank CUDA_VISIBLE_DEVICES) takes it whatever its local rank; more ranks than GPUs is none.
TEST(Runtime, LocalRankPicksItsGpu) {
  EXPECT_EQ(cuda_index_for_local_rank(0, 8), 0);
  EXPECT_EQ(cuda_index_for_local_rank(5, 8), 5);
  EXPECT_EQ(cuda_index_for_local_rank(3, 1), 0);
  EXPECT_EQ(cuda_index_for_local_rank(0, 1), 0);
  EXPECT_EQ(cuda_index_for_local_rank(2, 2), -1);
  EXPECT_EQ(cuda_index_for_local_rank(7, 4), -1);
}

}  // namespace
}  // namespace lmtrain::core
