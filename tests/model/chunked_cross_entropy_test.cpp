// The chunked LM head + loss (the GPU's path) against libtorch's linear + cross_entropy, forward
// and backward, in fp32 and under bf16 autocast, with rows ignored (-100) and chunks that do
// not divide the rows. The ops are device-generic, so the CPU checks the arithmetic. Each test
// runs twice: with libtorch's softmax ops (`auto` on the CPU) and with the fused classifier
// (`on`: the kernel's CPU reference, kernels/fused_reference.h).
#include "model/chunked_cross_entropy.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "core/runtime.h"
#include "fused_op_checks.h"
#include "kernels/kernel_switch.h"
#include "model/fused_classifier.h"

namespace lmtrain::model {
namespace {

// |a - b| / |b| in the max norm.
double rel_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>() / b.abs().max().item<double>();
}

struct Grads {
  double loss;
  at::Tensor dx, dw;
};

// Loss and gradients (with an upstream factor, as accumulation scales the loss) of `f`.
template <typename F>
Grads loss_and_grads(const at::Tensor& x0, const at::Tensor& w0, F&& f) {
  auto x = x0.clone().requires_grad_(true);
  auto w = w0.clone().requires_grad_(true);
  const at::Tensor loss = f(x, w);
  (loss * 0.37).backward();
  return {loss.item<double>(), x.grad(), w.grad()};
}

using kernels::FusedKernelMode;

class ChunkedCrossEntropy : public ::testing::TestWithParam<FusedKernelMode> {
 protected:
  testing::KernelModeScope mode_{GetParam()};
};

TEST_P(ChunkedCrossEntropy, Fp32MatchesLinearPlusCrossEntropyWithIgnoredRows) {
  for (int64_t chunk : {5, 64, 0}) {  // uneven chunks, one chunk, the automatic size
    torch::manual_seed(11);
    const int64_t N = 23, C = 16, V = 301;
    auto x = torch::randn({N, C}) * 2;
    auto w = torch::randn({V, C});
    auto t = torch::randint(V, {N}, torch::kLong);
    t.index_put_({torch::tensor({0, 7, 8, 22})}, -100);
    auto got = loss_and_grads(x, w, [&](auto& xx, auto& ww) {
      return chunked_linear_cross_entropy(xx, ww, t, 0, chunk);
    });
    auto want = loss_and_grads(
        x, w, [&](auto& xx, auto& ww) { return torch::cross_entropy_loss(xx.mm(ww.t()), t); });
    EXPECT_NEAR(got.loss, want.loss, 1e-5 * want.loss) << "chunk " << chunk;
    EXPECT_LT(rel_diff(got.dx, want.dx), 1e-5) << "chunk " << chunk;
    EXPECT_LT(rel_diff(got.dw, want.dw), 1e-5) << "chunk " << chunk;
    EXPECT_EQ(got.dx.narrow(0, 7, 2).abs().max().item<double>(), 0.0);  // ignored rows
  }
}

// Under autocast the GEMMs run in bf16 and the softmax in fp32, as the unfused head's linear
// (cast to bf16) and cross_entropy (on the logits upcast to fp32) do. Gradients differ by bf16
// rounding only: the unfused path rounds dlogits / count, this one dlogits.
TEST_P(ChunkedCrossEntropy, Bf16AutocastMatchesTheUnfusedHeadUpToRounding) {
  torch::manual_seed(12);
  const int64_t N = 40, C = 32, V = 500;
  auto x = torch::randn({N, C});
  auto w = torch::randn({V, C}) * 0.5;
  auto t = torch::randint(V, {N}, torch::kLong);
  core::Runtime bf16;
  bf16.precision = core::Precision::kBf16;
  bf16.compute_dtype = at::kBFloat16;
  auto under_autocast = [&](auto&& f) {
    return [&, f](auto& xx, auto& ww) {
      core::AutocastScope scope(bf16);
      return f(xx, ww);
    };
  };
  auto got = loss_and_grads(x, w, under_autocast([&](auto& xx, auto& ww) {
                              return chunked_linear_cross_entropy(xx, ww, t, 0, 16);
                            }));
  auto want = loss_and_grads(x, w, [&](auto& xx, auto& ww) {
    auto logits = xx.to(at::kBFloat16).mm(ww.to(at::kBFloat16).t()).to(at::kFloat);
    return torch::cross_entropy_loss(logits, t);
  });
  EXPECT_NEAR(got.loss, want.loss, 1e-5 * want.loss);
  EXPECT_EQ(got.dx.scalar_type(), at::kFloat);
  EXPECT_EQ(got.dw.scalar_type(), at::kFloat);
  EXPECT_LT(rel_diff(got.dx, want.dx), 2e-2);
  EXPECT_LT(rel_diff(got.dw, want.dw), 2e-2);
  // Against the fp32 loss the bf16 GEMMs do show: the autocast dtype was used.
  const double fp32 = torch::cross_entropy_loss(x.mm(w.t()), t).item<double>();
  EXPECT_NE(got.loss, fp32);
}

// A soft cap (nanochat's logit_softcap) bends the logits into cap * tanh(z / cap) before the
// loss: fp32, and under bf16 autocast against the capped fp32 upcast of the bf16 GEMM.
TEST_P(ChunkedCrossEntropy, SoftCappedLogitsMatchTanhThenCrossEntropy) {
  torch::manual_seed(14);
  const int64_t N = 30, C = 16, V = 200;
  const double cap = 3.0;  // small against the logits' spread, so the cap bends them
  auto x = torch::randn({N, C}) * 2;
  auto w = torch::randn({V, C});
  auto t = torch::randint(V, {N}, torch::kLong);
  t.index_put_({torch::tensor({3, 4})}, -100);
  auto capped_loss = [&](const at::Tensor& logits) {
    return torch::cross_entropy_loss(cap * torch::tanh(logits / cap), t);
  };
  auto got = loss_and_grads(
      x, w, [&](auto& xx, auto& ww) { return chunked_linear_cross_entropy(xx, ww, t, cap, 7); });
  auto want = loss_and_grads(x, w, [&](auto& xx, auto& ww) { return capped_loss(xx.mm(ww.t())); });
  EXPECT_NEAR(got.loss, want.loss, 1e-5 * want.loss);
  EXPECT_LT(rel_diff(got.dx, want.dx), 1e-5);
  EXPECT_LT(rel_diff(got.dw, want.dw), 1e-5);
  const double uncapped = torch::cross_entropy_loss(x.mm(w.t()), t).item<double>();
  EXPECT_GT(std::abs(got.loss - uncapped), 0.1);  // the cap did bend the logits

  core::Runtime bf16;
  bf16.precision = core::Precision::kBf16;
  bf16.compute_dtype = at::kBFloat16;
  auto got16 = loss_and_grads(x, w, [&](auto& xx, auto& ww) {
    core::AutocastScope scope(bf16);
    return chunked_linear_cross_entropy(xx, ww, t, cap, 7);
  });
  auto want16 = loss_and_grads(x, w, [&](auto& xx, auto& ww) {
    return capped_loss(xx.to(at::kBFloat16).mm(ww.to(at::kBFloat16).t()).to(at::kFloat));
  });
  EXPECT_NEAR(got16.loss, want16.loss, 1e-5 * want16.loss);
  EXPECT_LT(rel_diff(got16.dx, want16.dx), 2e-2);
  EXPECT_LT(rel_diff(got16.dw, want16.dw), 2e-2);
}

TEST_P(ChunkedCrossEntropy, NoGradGivesTheSameLossAndAllIgnoredGivesZero) {
  torch::manual_seed(13);
  auto x = torch::randn({9, 8});
  auto w = torch::randn({30, 8});
  auto t = torch::randint(30, {9}, torch::kLong);
  const double with_grad =
      chunked_linear_cross_entropy(x.requires_grad_(true), w, t, 0, 4).item<double>();
  {
    torch::NoGradGuard no_grad;
    EXPECT_EQ(chunked_linear_cross_entropy(x, w, t, 0, 4).item<double>(), with_grad);
  }
  auto none = torch::full({9}, -100, torch::kLong);
  auto g = loss_and_grads(x.detach(), w, [&](auto& xx, auto& ww) {
    return chunked_linear_cross_entropy(xx, ww, none, 0, 4);
  });
  EXPECT_EQ(g.loss, 0.0);
  EXPECT_EQ(g.dx.abs().max().item<double>(), 0.0);
  EXPECT_EQ(g.dw.abs().max().item<double>(), 0.0);
}

INSTANTIATE_TEST_SUITE_P(Softmax, ChunkedCrossEntropy,
                         ::testing::Values(FusedKernelMode::kAuto, FusedKernelMode::kOn),
                         [](const auto& info) {
                           return info.param == FusedKernelMode::kOn ? "ClassifierKernel"
                                                                     : "Libtorch";
                         });

// The switch reaches the chunked path: `on` runs the classifier on the CPU (its reference) for
// fp32 and bf16 logits, `auto` only on a GPU that proved it, fp16 never.
TEST(ChunkedCrossEntropySwitch, OnRunsTheClassifierForFp32AndBf16Logits) {
  {
    testing::KernelModeScope on(FusedKernelMode::kOn);
    EXPECT_TRUE(classifier_fused(false, at::kFloat));
    EXPECT_TRUE(classifier_fused(false, at::kBFloat16));
    EXPECT_FALSE(classifier_fused(false, at::kHalf));
  }
  testing::KernelModeScope automatic(FusedKernelMode::kAuto);
  EXPECT_FALSE(classifier_fused(false, at::kBFloat16));
}

}  // namespace
}  // namespace lmtrain::model
