// GPU MoE (named Cuda*, skipped where no GPU is visible): the grouped GEMM takes the CUDA
// grouped-GEMM kernel (at::_grouped_mm) for bf16 and matches per-expert fp32 GEMMs forward and
// backward, an empty expert included.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/runtime.h"
#include "model/grouped_linear.h"

namespace lmtrain::model {
namespace {

TEST(CudaMoe, GroupedLinearUsesTheGroupedKernelForBf16AndMatchesPerExpertGemms) {
  if (!core::cuda_available()) GTEST_SKIP() << "no GPU visible to libtorch";
  torch::manual_seed(0);
  const std::vector<int64_t> counts{40, 0, 88, 128};  // M = 256 rows, one empty expert
  const auto opts = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  auto x = torch::randn({256, 64}, opts).requires_grad_(true);
  auto w = (torch::randn({4, 128, 64}, opts) * 0.1).requires_grad_(true);
  EXPECT_TRUE(grouped_mm_supported(x, w));
  auto y = grouped_linear(x, w, counts);
  std::vector<at::Tensor> parts;
  int64_t start = 0;
  for (size_t e = 0; e < counts.size(); ++e) {
    parts.push_back(at::matmul(x.narrow(0, start, counts[e]).to(torch::kFloat),
                               w[static_cast<int64_t>(e)].to(torch::kFloat).t()));
    start += counts[e];
  }
  auto ref = at::cat(parts);
  EXPECT_LE((y.to(torch::kFloat) - ref).abs().max().item<double>(), 0.05);
  auto probe = torch::randn_like(ref);
  auto g = torch::autograd::grad({(y.to(torch::kFloat) * probe).sum()}, {x, w});
  auto r = torch::autograd::grad({(ref * probe).sum()}, {x, w});
  EXPECT_LE((g[0].to(torch::kFloat) - r[0]).abs().max().item<double>(), 0.1);
  EXPECT_LE((g[1].to(torch::kFloat) - r[1]).abs().max().item<double>(), 0.5);
  EXPECT_EQ(g[1][1].abs().max().item<double>(), 0.0);
}

}  // namespace
}  // namespace lmtrain::model
