// The fused GPU kernels (kernels/cuda/fused_*.cu) on a GPU (named Cuda*, skipped where no
// GPU is visible or the build has no kernels). Each is held to libtorch's unfused ops on the
// device, forward and backward, in fp32 and bf16, at the CPU tests' shapes and at a training
// shape (tests/fused_op_checks.h); then whole decoders train a few steps with every kernel on
// and off. A kernel's `proven_on_gpu` flag (kernels/kernel_switch.cpp) is set only after these
// pass on a device.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "core/runtime.h"
#include "fused_op_checks.h"
#include "kernels/fused_cuda.h"
#include "model/fused_classifier.h"
#include "model/fused_kernel_call.h"
#include "model/gpt.h"
#include "model_fixtures.h"

namespace lmtrain::model {
namespace {

using kernels::FusedKernelMode;
using testing::KernelModeScope;

bool skip_reason(std::string* why) {
  if (!core::cuda_available()) {
    *why = "no GPU visible to libtorch";
    return true;
  }
  if (!kernels::fused_cuda_kernels_built()) {
    *why = "this build has no fused GPU kernels (no nvcc)";
    return true;
  }
  return false;
}
#define SKIP_WITHOUT_KERNELS()                  \
  do {                                          \
    std::string why;                            \
    if (skip_reason(&why)) GTEST_SKIP() << why; \
  } while (0)

const c10::Device kGpu(c10::kCUDA, 0);

TEST(CudaFusedKernels, AddNormMatchesLibtorch) {
  SKIP_WITHOUT_KERNELS();
  for (const auto& c : testing::add_norm_cases()) {
    SCOPED_TRACE(testing::add_norm_case_name(c));
    testing::check_add_norm(c, kGpu);
    testing::check_add_norm(c, kGpu, /*rows=*/4096, /*C=*/768);  // GPT-2's width, many chunks
    testing::check_add_norm(c, kGpu, /*rows=*/513, /*C=*/1000);  // ragged tiles and chunks
  }
}

TEST(CudaFusedKernels, SwiGluMatchesLibtorch) {
  SKIP_WITHOUT_KERNELS();
  for (auto dtype : {at::kFloat, at::kBFloat16}) {
    SCOPED_TRACE(testing::dtype_name(dtype));
    testing::check_swiglu(dtype, kGpu);
    testing::check_swiglu(dtype, kGpu, /*rows=*/2048, /*hidden=*/3072);
  }
}

TEST(CudaFusedKernels, QkvSplitMatchesLibtorch) {
  SKIP_WITHOUT_KERNELS();
  for (const auto& c : testing::qkv_cases()) {
    SCOPED_TRACE(testing::qkv_case_name(c));
    testing::check_qkv_split(c, kGpu);
    testing::check_qkv_split(c, kGpu, /*T=*/1024, /*D=*/128);  // Qwen3's head_dim
    testing::check_qkv_split(c, kGpu, /*T=*/300, /*D=*/64);
  }
}

TEST(CudaFusedKernels, ClassifierMatchesLibtorch) {
  SKIP_WITHOUT_KERNELS();
  for (auto dtype : {at::kFloat, at::kBFloat16}) {
    for (double cap : {0.0, 15.0}) {
      SCOPED_TRACE(testing::dtype_name(dtype) + " cap " + std::to_string(cap));
      testing::check_classifier(dtype, cap, kGpu);
      // GPT-2's head at 4 rows of 1024 tokens: ragged chunks of an odd vocabulary.
      testing::check_classifier(dtype, cap, kGpu, /*N=*/4096, /*C=*/768, /*V=*/50257,
                                /*chunk=*/1000);
    }
  }
}

// The vectorized classifier (16-byte loads and stores, unproven) against the scalar one `auto`
// runs (proven on the H100, 2026-11-27), kernel to kernel on the same logits: rows of GPT-2's
// padded vocabulary (16-byte aligned), of its odd one (each row starts elsewhere in a vector), a
// small V and one shorter than a vector, from an aligned and a misaligned base; with and without
// the soft cap and the gradient. Every element of the gradient within one rounding of the
// other's (the row sums gather in another order), every loss within 1e-5.
TEST(CudaFusedKernels, ClassifierVectorizedEqualsTheProvenKernel) {
  SKIP_WITHOUT_KERNELS();
  torch::manual_seed(21);
  for (auto dtype : {at::kFloat, at::kBFloat16}) {
    for (int64_t V : {50304, 50257, 301, 5}) {
      for (int64_t offset : {0, 1}) {
        for (double cap : {0.0, 15.0}) {
          for (bool write_grad : {true, false}) {
            SCOPED_TRACE(testing::dtype_name(dtype) + " V " + std::to_string(V) + " offset " +
                         std::to_string(offset) + " cap " + std::to_string(cap) +
                         (write_grad ? " grad" : " loss only"));
            const int64_t n = 33;
            auto base = (torch::randn({n * V + offset}) * 4).to(kGpu, dtype);
            auto scalar = base.clone(), vectorized = base.clone();
            auto targets = torch::randint(V, {n}, torch::kLong);
            targets[5] = kIgnoreIndex;
            targets = targets.to(kGpu);
            const auto row_scale = (torch::rand({n}) + 0.5).to(kGpu);
            auto run = [&](at::Tensor& flat, bool vec) {
              auto loss = torch::empty({n}, flat.options().dtype(at::kFloat));
              kernels::classifier_cuda(flat.narrow(0, offset, n * V).data_ptr(),
                                       fused::element_type(flat), targets.data_ptr<int64_t>(),
                                       row_scale.data_ptr<float>(), n, V, static_cast<float>(cap),
                                       write_grad, loss.data_ptr<float>(), vec,
                                       fused::current_stream(flat));
              return loss.cpu();
            };
            const auto want_loss = run(scalar, false), got_loss = run(vectorized, true);
            EXPECT_TRUE(torch::allclose(got_loss, want_loss, 1e-5, 1e-6, /*equal_nan=*/true))
                << got_loss << want_loss;
            EXPECT_TRUE(std::isnan(got_loss[5].item<float>()));  // the ignored row
            const auto got = vectorized.to(at::kFloat).cpu(), want = scalar.to(at::kFloat).cpu();
            if (!write_grad) {
              EXPECT_TRUE(torch::equal(vectorized, base));  // the logits untouched
              continue;
            }
            // One bf16 rounding is 2^-8 of the value; fp32's differ by the sums' order.
            const double rel = dtype == at::kBFloat16 ? 1.0 / 128 : 1e-5;
            const double floor = 1e-6 * want.abs().max().item<double>();
            EXPECT_TRUE(((got - want).abs() <= want.abs() * rel + floor).all().item<bool>())
                << "largest difference " << (got - want).abs().max().item<double>();
            EXPECT_TRUE(torch::equal(vectorized.narrow(0, 0, offset), base.narrow(0, 0, offset)));
          }
        }
      }
    }
  }
}

// The same kernels on the CPU reference and the GPU give the same numbers in fp32 (up to the
// order of the row sums): the shared math (kernels/fused_math.h) is what both run.
TEST(CudaFusedKernels, KernelsAgreeWithTheirCpuReferences) {
  SKIP_WITHOUT_KERNELS();
  KernelModeScope on(FusedKernelMode::kOn);
  torch::manual_seed(9);
  auto x = torch::randn({64, 96}), d = torch::randn({64, 96}), w = torch::rand({96}) + 0.5;
  auto cpu = add_norm(x, d, w, torch::randn({96}), false, 1e-5);
  auto gpu = add_norm(x.to(kGpu), d.to(kGpu), w.to(kGpu), torch::randn({96}).to(kGpu), false, 1e-5);
  EXPECT_LE(testing::relative_error(gpu.h, cpu.h), 1e-6);
  auto h = torch::randn({33, 2 * 50});
  EXPECT_LE(testing::relative_error(swiglu(h.to(kGpu), 50), swiglu(h, 50)), 1e-6);
  QkvSplitSpec spec;
  spec.n_head = 4;
  spec.n_kv_head = 2;
  spec.head_dim = 32;
  spec.rope = true;
  spec.q_norm_weight = torch::rand({32}) + 0.5;
  spec.k_norm_weight = torch::rand({32}) + 0.5;
  auto packed = torch::randn({2, 10, 8 * 32});
  auto heads_cpu = qkv_split(packed, spec);
  QkvSplitSpec spec_gpu = spec;
  spec_gpu.q_norm_weight = spec.q_norm_weight.to(kGpu);
  spec_gpu.k_norm_weight = spec.k_norm_weight.to(kGpu);
  auto heads_gpu = qkv_split(packed.to(kGpu), spec_gpu);
  EXPECT_LE(testing::relative_error(heads_gpu.q, heads_cpu.q), 1e-5);
  EXPECT_LE(testing::relative_error(heads_gpu.k, heads_cpu.k), 1e-5);
  EXPECT_LE(testing::relative_error(heads_gpu.v, heads_cpu.v), 0.0);
  auto logits = torch::randn({7, 1000}) * 4, targets = torch::randint(1000, {7}, torch::kLong);
  auto scale = torch::rand({7});
  auto grad_cpu = logits.clone(), grad_gpu = logits.to(kGpu);
  auto loss_cpu = classifier_(grad_cpu, targets, scale, 3.0, true);
  auto loss_gpu = classifier_(grad_gpu, targets.to(kGpu), scale.to(kGpu), 3.0, true);
  // CUDA's expf and tanhf are within 2 ulp of the host's, and the row sums go in another order.
  EXPECT_LE(testing::relative_error(loss_gpu, loss_cpu), 1e-5);
  EXPECT_LE(testing::relative_error(grad_gpu, grad_cpu), 1e-5);
}

// A few SGD steps of bf16-autocast training: the loss curves with the kernels on and
// off stay within bf16's noise of each other.
TEST(CudaFusedKernels, DecodersTrainTheSameWithKernelsOnAndOff) {
  SKIP_WITHOUT_KERNELS();
  GptConfig qwen = with_llama_family(tiny_gpt_config(128, 512, 64), Arch::kQwen3);
  qwen.n_head = 4;
  qwen.n_kv_head = 2;
  qwen.head_dim_ = 32;
  const GptConfig gpt2 = tiny_gpt_config(128, 512, 64);
  for (const GptConfig& cfg : {qwen, gpt2}) {
    SCOPED_TRACE(core::to_string(cfg.arch));
    const auto off = testing::bf16_training_losses(cfg, kGpu, FusedKernelMode::kOff);
    const auto on = testing::bf16_training_losses(cfg, kGpu, FusedKernelMode::kOn);
    for (size_t i = 0; i < off.size(); ++i) EXPECT_NEAR(on[i], off[i], 0.02 * off[i]) << i;
    EXPECT_LT(on.back(), on.front());
  }
}

}  // namespace
}  // namespace lmtrain::model
