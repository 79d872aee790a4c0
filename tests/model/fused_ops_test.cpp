// Fused linear + cross-entropy and GELU(tanh) against libtorch's ops, forward and backward.
#include <gtest/gtest.h>

#include "core/error.h"
#include "kernel_isa_fixture.h"
#include "model/fused_cross_entropy.h"
#include "model/fused_gelu.h"

namespace lmtrain::model {
namespace {

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

LMTRAIN_KERNEL_ISA_SUITE(FusedCrossEntropyIsa);
LMTRAIN_KERNEL_ISA_SUITE(FusedGeluIsa);

TEST_P(FusedCrossEntropyIsa, LossAndGradientsMatchLinearPlusCrossEntropy) {
  struct Case {
    int64_t N, C, V;
  };
  // N on and off the column kernel's 16-token blocks and their two 8-wide vectors (N = 12: the
  // second vector part-filled; 20: a full block, then a part of one); V off the vector width; a
  // single row; logits large enough to need the max shift.
  for (auto c : {Case{7, 5, 13}, Case{64, 32, 512}, Case{1, 8, 8}, Case{33, 16, 1001},
                 Case{12, 8, 300}, Case{20, 4, 3}}) {
    torch::manual_seed(c.V);
    auto x = (torch::randn({c.N, c.C}) * 3).requires_grad_(true);
    auto w = torch::randn({c.V, c.C}).requires_grad_(true);
    auto t = torch::randint(c.V, {c.N}, torch::kLong);
    auto x_ref = x.detach().clone().requires_grad_(true);
    auto w_ref = w.detach().clone().requires_grad_(true);
    ASSERT_TRUE(fused_cross_entropy_supported(x, w));
    auto loss = fused_linear_cross_entropy(x, w, t);
    auto loss_ref = torch::cross_entropy_loss(torch::linear(x_ref, w_ref), t);
    EXPECT_NEAR(loss.item<double>(), loss_ref.item<double>(), 1e-5 * loss_ref.item<double>())
        << "V=" << c.V;
    // A non-unit upstream gradient (as gradient accumulation scales the loss).
    (loss * 0.37).backward();
    (loss_ref * 0.37).backward();
    EXPECT_LT(max_abs_diff(x.grad(), x_ref.grad()), 1e-6) << "V=" << c.V;
    EXPECT_LT(max_abs_diff(w.grad(), w_ref.grad()), 1e-6) << "V=" << c.V;
  }
}

TEST(FusedCrossEntropy, NoGradModeGivesTheSameLoss) {
  torch::manual_seed(3);
  auto x = torch::randn({20, 8});
  auto w = torch::randn({50, 8});
  auto t = torch::randint(50, {20}, torch::kLong);
  torch::NoGradGuard no_grad;
  EXPECT_NEAR(fused_linear_cross_entropy(x, w, t).item<double>(),
              torch::cross_entropy_loss(torch::linear(x, w), t).item<double>(), 1e-5);
}

TEST(FusedCrossEntropy, TargetOutsideTheVocabularyIsAnError) {
  auto x = torch::randn({4, 8});
  auto w = torch::randn({10, 8});
  try {
    fused_linear_cross_entropy(x, w, torch::tensor({1, 2, 10, 3}, torch::kLong));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("target 10 is outside the vocabulary [0, 10)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(fused_linear_cross_entropy(x, w, torch::tensor({-1, 0, 0, 0}, torch::kLong)), Error);
}

TEST_P(FusedGeluIsa, MatchesTorchGeluTanhForwardAndBackward) {
  // Lengths off the 8-wide vector; values from deep negative (gelu -> 0) to large positive
  // (tanh saturates) and near zero (where tanh(u) ~ u). The reference is libtorch's gelu in
  // double; the kernel must be as close to it as float rounding allows (relative 1e-6).
  for (int64_t n : {1, 7, 8, 1000, 40003}) {
    torch::manual_seed(n);
    auto x = (torch::randn({n}) * 4).requires_grad_(true);
    {
      torch::NoGradGuard no_grad;
      if (n >= 8) x.narrow(0, 0, 4).copy_(torch::tensor({-30.f, 1e-4f, -1e-4f, 25.f}));
    }
    auto x_ref = x.detach().to(torch::kDouble).requires_grad_(true);
    auto y = gelu_tanh(x);
    auto y_ref = torch::gelu(x_ref, "tanh");
    auto tol = [](const at::Tensor& ref) { return ref.abs().clamp_min(1.0) * 1e-6; };
    EXPECT_TRUE(((y.to(torch::kDouble) - y_ref).abs() <= tol(y_ref)).all().item<bool>())
        << "n=" << n;
    auto dy = torch::randn({n});
    (y * dy).sum().backward();
    (y_ref * dy.to(torch::kDouble)).sum().backward();
    auto g_ref = x_ref.grad();
    EXPECT_TRUE(((x.grad().to(torch::kDouble) - g_ref).abs() <= tol(g_ref)).all().item<bool>())
        << "n=" << n << " max diff " << max_abs_diff(x.grad().to(torch::kDouble), g_ref);
  }
}

TEST(FusedGelu, NonFloatTensorsTakeTheLibtorchPath) {
  auto x = torch::randn({5}, torch::kDouble);
  EXPECT_TRUE(torch::allclose(gelu_tanh(x), torch::gelu(x, "tanh")));
}

}  // namespace
}  // namespace lmtrain::model
