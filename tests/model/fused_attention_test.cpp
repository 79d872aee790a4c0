// The fused CPU attention kernel must equal the generic path, forward and backward, for head
// sizes on and off the 16-wide register tile and lengths on and off the 6-row blocks.
#include "model/fused_attention.h"

#include <gtest/gtest.h>

#include "kernel_isa_fixture.h"
#include "model/attention.h"

namespace lmtrain::model {
namespace {

// Reference: split the packed projection and run the generic attention.
at::Tensor reference_attention(const at::Tensor& qkv, int64_t H) {
  const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3, D = C / H;
  auto parts = qkv.view({B, T, 3, H, D}).permute({2, 0, 3, 1, 4});
  return causal_attention(parts[0], parts[1], parts[2], 0.0).transpose(1, 2).reshape({B, T, C});
}

LMTRAIN_KERNEL_ISA_SUITE(FusedAttentionIsa);

TEST_P(FusedAttentionIsa, MatchesGenericPathForwardAndBackward) {
  struct Case {
    int64_t B, T, H, D;
  };
  for (auto c : {Case{2, 5, 2, 4}, Case{3, 17, 3, 8}, Case{1, 64, 4, 32}, Case{2, 33, 1, 7},
                 Case{1, 100, 2, 16}, Case{1, 256, 2, 64}, Case{2, 1, 2, 8}}) {
    torch::manual_seed(c.T);
    auto qkv = torch::randn({c.B, c.T, 3 * c.H * c.D}).requires_grad_(true);
    auto qkv_ref = qkv.detach().clone().requires_grad_(true);
    auto y = fused_causal_attention(qkv, c.H);
    auto y_ref = reference_attention(qkv_ref, c.H);
    EXPECT_TRUE(torch::allclose(y, y_ref, 1e-5, 1e-6)) << "T=" << c.T;
    auto dy = torch::randn_like(y);
    (y * dy).sum().backward();
    (y_ref * dy).sum().backward();
    EXPECT_TRUE(torch::allclose(qkv.grad(), qkv_ref.grad(), 1e-4, 1e-5))
        << "T=" << c.T << " max diff " << (qkv.grad() - qkv_ref.grad()).abs().max().item<double>();
  }
}

TEST(FusedAttention, OnlyForContiguousCpuFloat) {
  EXPECT_FALSE(fused_attention_supported(torch::randn({2, 4, 12}, torch::kDouble)));
  EXPECT_FALSE(fused_attention_supported(torch::randn({2, 12, 4}).transpose(1, 2)));
}

}  // namespace
}  // namespace lmtrain::model
