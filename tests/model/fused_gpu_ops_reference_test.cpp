// The fused GPU kernels' CPU references, through the same autograd functions the GPU runs
// (train.fused_kernels=on): forward against libtorch's ops, backward against autograd of those
// ops, in fp32 and bf16 (tests/fused_op_checks.h); the decoders with every fused op on against
// the default; the shared bf16 rounding; the switch's rules.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <string>

#include "core/config_choice.h"
#include "core/runtime.h"
#include "fused_op_checks.h"
#include "kernels/fused_cuda.h"
#include "kernels/fused_math.h"
#include "model/gpt.h"
#include "model_fixtures.h"

namespace lmtrain::model {
namespace {

using kernels::FusedKernelMode;
using testing::KernelModeScope;

TEST(FusedMath, Bf16RoundIsWhatABFloat16StoreGives) {
  torch::manual_seed(0);
  auto x = torch::randn({4096}) * 1000;
  std::vector<float> values(x.data_ptr<float>(), x.data_ptr<float>() + x.numel());
  // Ties to even (both ways), the largest finite value, infinities, -0, subnormals.
  for (uint32_t bits : {0x3f808000u, 0x3f818000u, 0x7f7fffffu, 0x7f800000u, 0xff800000u,
                        0x80000000u, 0x00000001u, 0x007fffffu}) {
    float f;
    std::memcpy(&f, &bits, sizeof f);
    values.push_back(f);
  }
  for (float v : values)
    EXPECT_EQ(kernels::bf16_round(v), static_cast<float>(c10::BFloat16(v))) << v;
  EXPECT_TRUE(std::isnan(kernels::bf16_round(std::numeric_limits<float>::quiet_NaN())));
}

class FusedAddNorm : public ::testing::TestWithParam<testing::AddNormCase> {};
TEST_P(FusedAddNorm, ReferenceMatchesLibtorchForwardAndAutogradBackward) {
  testing::check_add_norm(GetParam(), c10::kCPU);
}
INSTANTIATE_TEST_SUITE_P(Cases, FusedAddNorm, ::testing::ValuesIn(testing::add_norm_cases()),
                         [](const auto& info) { return testing::add_norm_case_name(info.param); });

class FusedSwiGlu : public ::testing::TestWithParam<at::ScalarType> {};
TEST_P(FusedSwiGlu, ReferenceMatchesLibtorchForwardAndAutogradBackward) {
  testing::check_swiglu(GetParam(), c10::kCPU);
}
INSTANTIATE_TEST_SUITE_P(Types, FusedSwiGlu, ::testing::Values(at::kFloat, at::kBFloat16),
                         [](const auto& info) { return testing::dtype_name(info.param); });

class FusedQkvSplit : public ::testing::TestWithParam<testing::QkvCase> {};
TEST_P(FusedQkvSplit, ReferenceMatchesLibtorchForwardAndAutogradBackward) {
  testing::check_qkv_split(GetParam(), c10::kCPU);
}
INSTANTIATE_TEST_SUITE_P(Cases, FusedQkvSplit, ::testing::ValuesIn(testing::qkv_cases()),
                         [](const auto& info) { return testing::qkv_case_name(info.param); });

struct ClassifierCase {
  at::ScalarType dtype;
  double cap;
};
class FusedClassifier : public ::testing::TestWithParam<ClassifierCase> {};
TEST_P(FusedClassifier, ReferenceMatchesLibtorchForwardAndGradients) {
  testing::check_classifier(GetParam().dtype, GetParam().cap, c10::kCPU);
}
INSTANTIATE_TEST_SUITE_P(
    Cases, FusedClassifier,
    ::testing::Values(ClassifierCase{at::kFloat, 0}, ClassifierCase{at::kFloat, 2.5},
                      ClassifierCase{at::kBFloat16, 0}, ClassifierCase{at::kBFloat16, 2.5}),
    [](const auto& info) {
      return testing::dtype_name(info.param.dtype) + (info.param.cap > 0 ? "_SoftCap" : "");
    });

TEST(FusedAddNormMixed, Fp32StreamTakesABf16DeltaAsLibtorchPromotes) {
  torch::manual_seed(4);
  auto x = torch::randn({4, 32}).requires_grad_(true);
  auto delta = torch::randn({4, 32}).to(at::kBFloat16).requires_grad_(true);
  auto w = torch::ones({32}).requires_grad_(true);
  auto run = [&](FusedKernelMode mode) {
    KernelModeScope scope(mode);
    auto out = add_norm(x, delta, w, at::Tensor(), /*rms=*/true, 1e-6);
    auto g = torch::autograd::grad({out.y.sum() + out.h.square().sum()}, {x, delta, w});
    return std::make_pair(out, g);
  };
  auto [ref, ref_grads] = run(FusedKernelMode::kOff);
  auto [got, got_grads] = run(FusedKernelMode::kOn);
  EXPECT_EQ(got.h.scalar_type(), at::kFloat);
  EXPECT_LE(testing::relative_error(got.h, ref.h), 1e-6);
  EXPECT_LE(testing::relative_error(got.y, ref.y), 1e-5);
  EXPECT_EQ(got_grads[1].scalar_type(), at::kBFloat16);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_LE(testing::relative_error(got_grads[i], ref_grads[i]), 1e-2) << i;
  // A bf16 stream with an fp32 delta would promote h to fp32: that stays on libtorch's path.
  KernelModeScope on(FusedKernelMode::kOn);
  EXPECT_FALSE(add_norm_fused(x.to(at::kBFloat16), delta.to(at::kFloat)));
}

TEST(FusedAddNormMixed, UnderBf16AutocastTheNormIsStoredInBf16ForTheNextLinear) {
  torch::manual_seed(5);
  auto x = torch::randn({6, 48}).requires_grad_(true);
  auto delta = torch::randn({6, 48}).to(at::kBFloat16).requires_grad_(true);
  auto w = (torch::rand({48}) + 0.5).requires_grad_(true);
  auto b = torch::randn({48}).requires_grad_(true);
  auto lin = torch::randn({16, 48}) * 0.1;
  auto run = [&](FusedKernelMode mode) {
    KernelModeScope scope(mode);
    core::AutocastScope autocast(c10::kCPU, true, at::kBFloat16);
    auto out = add_norm(x, delta, w, b, /*rms=*/false, 1e-5);
    auto y = torch::linear(out.y, lin);  // what a block does with the norm's output
    auto g = torch::autograd::grad({y.to(at::kFloat).sum() + out.h.sum()}, {x, delta, w, b});
    return std::make_tuple(out, y, g);
  };
  auto [ref, ref_y, ref_grads] = run(FusedKernelMode::kOff);
  auto [got, got_y, got_grads] = run(FusedKernelMode::kOn);
  EXPECT_EQ(ref.y.scalar_type(), at::kFloat);  // libtorch: fp32, cast by the linear
  EXPECT_EQ(got.y.scalar_type(), at::kBFloat16);
  EXPECT_EQ(got.h.scalar_type(), at::kFloat);
  EXPECT_LE(testing::relative_error(got.y, ref.y), 1e-2);
  EXPECT_TRUE(torch::equal(got_y, ref_y) || testing::relative_error(got_y, ref_y) <= 1e-2);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_LE(testing::relative_error(got_grads[i], ref_grads[i]), 2e-2) << i;
}

TEST(FusedKernelsModel, DecodersGiveTheUnfusedLossAndGradients) {
  GptConfig qwen = with_llama_family(tiny_gpt_config(16, 64, 16), Arch::kQwen3);
  qwen.n_head = 4;
  qwen.n_kv_head = 2;
  qwen.head_dim_ = 8;
  const GptConfig llama = with_llama_family(tiny_gpt_config(16, 64, 16), Arch::kLlama);
  const GptConfig gpt2 = tiny_gpt_config(16, 64, 16);
  for (const GptConfig& cfg : {qwen, llama, gpt2}) {
    torch::manual_seed(11);
    Gpt m(cfg);
    auto ids = torch::randint(cfg.vocab_size, {2, 12}, torch::kLong);
    auto targets = torch::randint(cfg.vocab_size, {2, 12}, torch::kLong);
    // auto: the CPU kernels (attention, loss, GELU) with libtorch's norms; on: the fused ops'
    // references in every block as well.
    testing::expect_fused_model_matches(*m, ids, targets, FusedKernelMode::kAuto, false, 1e-5, 1e-4,
                                        core::to_string(cfg.arch));
  }
}

// Under bf16 autocast the head takes the chunked path (the GPU's): with `on` its softmax is the
// classifier's reference, soft cap included (nanochat's logit_softcap).
TEST(FusedKernelsModel, Bf16SoftCappedHeadGivesTheUnfusedLossAndGradients) {
  GptConfig cfg = tiny_gpt_config(16, 64, 16);
  cfg.logit_softcap = 5.0;
  torch::manual_seed(12);
  Gpt m(cfg);
  auto ids = torch::randint(cfg.vocab_size, {2, 12}, torch::kLong);
  auto targets = torch::randint(cfg.vocab_size, {2, 12}, torch::kLong);
  // The blocks' bf16 ops round differently in the two modes.
  testing::expect_fused_model_matches(*m, ids, targets, FusedKernelMode::kAuto, true, 1e-2, 5e-2,
                                      "soft-capped head");
}

TEST(FusedKernelSwitch, AutoRunsOnlyGpuProvenKernelsAndOnlyOnTheGpu) {
  for (const auto& info : kernels::kFusedKernels) {
    {
      KernelModeScope scope(FusedKernelMode::kAuto);
      EXPECT_FALSE(kernels::fused_kernel_enabled(info.kernel, /*on_cuda=*/false)) << info.name;
      EXPECT_EQ(kernels::fused_kernel_enabled(info.kernel, /*on_cuda=*/true),
                info.proven_on_gpu && kernels::fused_cuda_kernels_built())
          << info.name;
      EXPECT_TRUE(kernels::fused_cpu_kernels_enabled());
    }
    {
      KernelModeScope scope(FusedKernelMode::kOn);
      EXPECT_TRUE(kernels::fused_kernel_enabled(info.kernel, false)) << info.name;
      EXPECT_EQ(kernels::fused_kernel_enabled(info.kernel, true),
                kernels::fused_cuda_kernels_built());
    }
    {
      KernelModeScope scope(FusedKernelMode::kOff);
      EXPECT_FALSE(kernels::fused_kernel_enabled(info.kernel, false));
      EXPECT_FALSE(kernels::fused_kernel_enabled(info.kernel, true));
      EXPECT_FALSE(kernels::fused_cpu_kernels_enabled());
    }
  }
#ifdef LMTRAIN_CUDA_KERNELS
  EXPECT_TRUE(kernels::fused_cuda_kernels_built());
#else
  EXPECT_FALSE(kernels::fused_cuda_kernels_built());
#endif
}

TEST(FusedKernelSwitch, ConfigChoicesAreTheSwitchModesInOrder) {
  // cli/dist_setup.cpp maps train.fused_kernels' choices onto the switch's modes.
  const auto key = core::choice_key(core::FusedKernels{});
  EXPECT_EQ(core::choice_name(key, static_cast<size_t>(FusedKernelMode::kAuto)), "auto");
  EXPECT_EQ(core::choice_name(key, static_cast<size_t>(FusedKernelMode::kOn)), "on");
  EXPECT_EQ(core::choice_name(key, static_cast<size_t>(FusedKernelMode::kOff)), "off");
}

}  // namespace
}  // namespace lmtrain::model
