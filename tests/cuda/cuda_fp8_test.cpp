// FP8 linear layers on a GPU (named Cuda*, skipped where no GPU with fp8 tensor cores is visible):
// cuBLASLt's fp8 GEMMs through at::_scaled_mm give the dequantized operands' product (the CPU
// tests' reference) forward and backward, and a decoder trains with fp8 as with bf16.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/runtime.h"
#include "fused_op_checks.h"
#include "model/fp8_linear.h"
#include "model/gpt.h"
#include "model_fixtures.h"

namespace lmtrain::model {
namespace {

const c10::Device kFp8Gpu(c10::kCUDA, 0);

#define SKIP_WITHOUT_FP8()                                                                       \
  do {                                                                                           \
    if (!core::cuda_available()) GTEST_SKIP() << "no GPU visible to libtorch";                   \
    if (!fp8_linear_supported(torch::zeros({16, 16}, kFp8Gpu), torch::zeros({16, 16}, kFp8Gpu))) \
      GTEST_SKIP() << "the GPU has no fp8 tensor cores (compute capability < 8.9)";              \
  } while (0)

TEST(CudaFp8, GpuGemmsMatchTheCpuOnesForwardAndBackward) {
  SKIP_WITHOUT_FP8();
  torch::manual_seed(2);
  auto x = torch::randn({1000, 768}) * 3, w = torch::randn({2304, 768}) * 0.05;
  auto probe = torch::randn({1000, 2304});
  auto run = [&](c10::Device dev) {
    auto xd = x.to(dev).requires_grad_(true), wd = w.to(dev).requires_grad_(true);
    auto y = fp8_linear(xd, wd, at::Tensor());
    auto g = torch::autograd::grad({(y.to(at::kFloat) * probe.to(dev)).sum()}, {xd, wd});
    return std::vector<at::Tensor>{y, g[0], g[1]};
  };
  const auto cpu = run(c10::kCPU), gpu = run(kFp8Gpu);
  EXPECT_LE(testing::relative_error(gpu[0], cpu[0]), 1e-2) << "y";
  EXPECT_LE(testing::relative_error(gpu[1], cpu[1]), 1e-2) << "dx";
  EXPECT_LE(testing::relative_error(gpu[2], cpu[2]), 1e-2) << "dW";
}

TEST(CudaFp8, DecoderTrainsAsWithBf16) {
  SKIP_WITHOUT_FP8();
  GptConfig cfg = tiny_gpt_config(256, 512, 128);
  auto train = [&](bool fp8) {
    torch::manual_seed(21);
    Gpt m(cfg);
    if (fp8) use_fp8_block_linears(*m);
    m->to(kFp8Gpu);
    auto ids = torch::randint(cfg.vocab_size, {8, 128}, torch::kLong).to(kFp8Gpu);
    auto targets = ids.roll(-1, 1);
    torch::optim::AdamW opt(m->parameters(), torch::optim::AdamWOptions(1e-3));
    return testing::bf16_training_losses(*m, ids, targets, opt, 30);
  };
  const auto bf16 = train(false), fp8 = train(true);
  EXPECT_NEAR(fp8.front(), bf16.front(), 0.02 * bf16.front());
  EXPECT_NEAR(fp8.back(), bf16.back(), 0.05 * bf16.front());
  EXPECT_LT(fp8.back(), 0.8 * fp8.front());
}

}  // namespace
}  // namespace lmtrain::model
