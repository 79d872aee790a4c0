// GPU MoE (named Cuda*, skipped where no GPU is visible): the grouped GEMM takes the CUDA
// grouped-GEMM kernel (at::_grouped_mm) for bf16 and matches per-expert fp32 GEMMs forward and
// backward, an empty expert included. The MoE row moves (kernels: moe_rows) against libtorch's
// path on the device, at the CPU tests' shapes and at a training shape (tests/moe_rows_checks.h),
// against their CPU references, and deterministic; an MoE decoder trains alike with the kernels
// on and off; an MoE run under train.cuda_graphs equals the eager run (nothing in an MoE layer
// reads the host with every expert local and no capacity). moe_rows' `proven_on_gpu` flag
// (kernels/kernel_switch.cpp) is set only after these pass on a device.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>

#include "core/runtime.h"
#include "e2e/corpus.h"
#include "e2e/dist_harness.h"
#include "fused_op_checks.h"
#include "kernels/fused_cuda.h"
#include "model/gpt.h"
#include "model/grouped_linear.h"
#include "model_fixtures.h"
#include "moe_rows_checks.h"
#include "test_util.h"

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

using kernels::FusedKernelMode;
using testing::KernelModeScope;

const c10::Device kMoeGpu(c10::kCUDA, 0);

#define SKIP_WITHOUT_MOE_KERNELS()                                             \
  do {                                                                         \
    if (!core::cuda_available()) GTEST_SKIP() << "no GPU visible to libtorch"; \
    if (!kernels::fused_cuda_kernels_built())                                  \
      GTEST_SKIP() << "this build has no fused GPU kernels (no nvcc)";         \
  } while (0)

// Qwen3-MoE's layer at T=2048, B=8 has N=16384 tokens, top-8, width 1024.
std::vector<testing::MoeRowsCase> training_shape_cases() {
  return {{16384, 8, 64, 1024, 0.0, at::kBFloat16, at::kBFloat16},
          {16384, 8, 64, 1024, 0.0, at::kFloat, at::kBFloat16},
          {16384, 8, 64, 1024, 1.0, at::kBFloat16, at::kBFloat16},
          {4096, 8, 64, 1024, 0.0, at::kFloat, at::kFloat},
          {1000, 6, 16, 1000, 0.0, at::kBFloat16, at::kBFloat16}};  // ragged: C % 4 == 0, N odd
}

TEST(CudaMoeRows, KernelsMatchLibtorch) {
  SKIP_WITHOUT_MOE_KERNELS();
  for (const auto& c : testing::moe_rows_cases()) {
    SCOPED_TRACE(testing::moe_rows_case_name(c));
    testing::check_moe_rows(c, kMoeGpu);
  }
  for (const auto& c : training_shape_cases()) {
    SCOPED_TRACE(testing::moe_rows_case_name(c));
    testing::check_moe_rows(c, kMoeGpu);
  }
}

// The kernels and their CPU references run the same math (kernels/moe_rows_math.h): the moves
// are the same bits, the weighted sums equal up to fused multiply-adds.
TEST(CudaMoeRows, KernelsAgreeWithTheirCpuReferences) {
  SKIP_WITHOUT_MOE_KERNELS();
  for (const auto& c : {testing::MoeRowsCase{2048, 8, 64, 1024, 0.0, at::kFloat, at::kFloat},
                        testing::MoeRowsCase{2048, 8, 64, 1024, 1.0, at::kBFloat16, at::kBFloat16},
                        testing::MoeRowsCase{333, 3, 8, 90, 0.7, at::kFloat, at::kBFloat16}}) {
    SCOPED_TRACE(testing::moe_rows_case_name(c));
    const auto cpu = testing::run_moe_rows(c, testing::moe_rows_inputs(c, c10::kCPU), c10::kCPU,
                                           FusedKernelMode::kOn);
    const auto gpu = testing::run_moe_rows(c, testing::moe_rows_inputs(c, kMoeGpu), kMoeGpu,
                                           FusedKernelMode::kOn);
    EXPECT_TRUE(torch::equal(gpu.rows.cpu(), cpu.rows));
    EXPECT_TRUE(torch::equal(gpu.dx.cpu(), cpu.dx));
    EXPECT_LE(testing::relative_error(gpu.y, cpu.y), c.tokens_type == at::kFloat ? 1e-6 : 1e-2);
    EXPECT_TRUE(torch::equal(gpu.d_out.cpu(), cpu.d_out));
    EXPECT_LE(testing::relative_error(gpu.dw, cpu.dw), 1e-5);
  }
}

// A few bf16 SGD steps of an MoE decoder: the loss curves with the kernels on and off stay
// within bf16's noise of each other.
TEST(CudaMoeRows, MoeDecoderTrainsTheSameWithKernelsOnAndOff) {
  SKIP_WITHOUT_MOE_KERNELS();
  GptConfig cfg = tiny_moe_config(MlpKind::kSwiGlu, 8, 2, /*expert_hidden=*/128);
  cfg.n_embd = 128;
  cfg.vocab_size = 512;
  cfg.block_size = 64;
  for (const double capacity : {0.0, 1.0}) {
    SCOPED_TRACE(capacity);
    cfg.moe.capacity_factor = capacity;
    const auto off = testing::bf16_training_losses(cfg, kMoeGpu, FusedKernelMode::kOff);
    const auto on = testing::bf16_training_losses(cfg, kMoeGpu, FusedKernelMode::kOn);
    for (size_t i = 0; i < off.size(); ++i) EXPECT_NEAR(on[i], off[i], 0.02 * off[i]) << i;
    EXPECT_LT(on.back(), on.front());
  }
}

// train.cuda_graphs with MoE (dist.ep=1, dropless, bf16): the captured step reads nothing from
// the host, so the capture succeeds and replays give the eager run's losses and weights. With
// the kernels on, every MoE op is deterministic and the runs agree to fp32 rounding; libtorch's
// path adds its gradients with atomics (index_add_), so it agrees within their noise.
TEST(CudaMoeGraph, CudaGraphMoeStepsEqualEagerSteps) {
  if (!core::cuda_available()) GTEST_SKIP() << "no GPU visible to libtorch";
  testing::TempDir dir("lmtrain_cuda_moe_graph");
  const std::string data = testing::prepare_synthetic_data(dir.path());
  const std::string moe = testing::tiny_train_flags() + " --data.dir=" + data +
                          " --model.mlp=swiglu --model.moe.num_experts=4 --model.moe.top_k=2"
                          " --model.moe.expert_hidden=32 --model.moe.z_loss_coef=0.01"
                          " --model.moe.bias_update_rate=0.01 --train.max_steps=12 --optim.eps=1e-6"
                          " --train.tf32=false --train.device=cuda --train.precision=bf16";
  for (const char* kernels : {"on", "off"}) {
    SCOPED_TRACE(kernels);
    const std::string flags = moe + " --train.fused_kernels=" + kernels;
    const auto eager = dir.file(std::string("eager_") + kernels);
    const auto graph = dir.file(std::string("graph_") + kernels);
    auto a =
        testing::run_command(testing::lmtrain_binary() + " train" + flags + " --run.dir=" + eager);
    ASSERT_EQ(a.exit_code, 0) << a.output;
    auto b =
        testing::run_command(testing::lmtrain_binary() + " train" + flags + " --run.dir=" + graph +
                             " --train.cuda_graphs=true --train.cuda_graph_warmup=2");
    ASSERT_EQ(b.exit_code, 0) << b.output;
    EXPECT_NE(b.output.find("CUDA graph: step captured after 2 eager step(s)"), std::string::npos)
        << b.output;
    const double tol = std::string(kernels) == "on" ? 1e-6 : 1e-4;
    const auto le = testing::logged_losses(eager), lg = testing::logged_losses(graph);
    ASSERT_EQ(le.size(), lg.size());
    for (size_t i = 0; i < le.size(); ++i)
      EXPECT_NEAR(lg[i], le[i], tol * std::abs(le[i])) << "step " << i + 1;
    EXPECT_LE(
        testing::max_param_rel_diff(graph + "/checkpoints/latest", eager + "/checkpoints/latest"),
        tol * 10);
  }
}

}  // namespace
}  // namespace lmtrain::model
