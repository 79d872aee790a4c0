// AdamW's device path on a GPU (named Cuda*, skipped where no GPU is visible): libtorch's fused
// CUDA kernel reading lr and the step count from device scalars, with weight decay folded into
// it on the decayed ranges (optim::adamw_update), against the CPU's host path.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/runtime.h"
#include "optim/adamw.h"

namespace lmtrain::optim {
namespace {

TEST(CudaAdamW, DecayInTheFusedKernelMatchesTheCpuHostPath) {
  if (!core::cuda_available()) GTEST_SKIP() << "no GPU visible to libtorch";
  const c10::Device gpu(c10::kCUDA, 0);
  torch::manual_seed(9);
  const int64_t n = 100003;  // odd: pieces of every alignment
  const Ranges decayed = {{0, 40000}, {40100, 70000}, {70001, 100003}};
  AdamWOptions o;
  o.weight_decay = 0.1;
  auto p = torch::randn({n}), m = torch::zeros({n}), v = torch::zeros({n});
  auto pg = p.to(gpu), mg = m.to(gpu), vg = v.to(gpu);
  DeviceStepScalars dev;
  const double lrs[] = {1e-2, 3e-2, 5e-3, 2e-2};
  for (int64_t step = 1; step <= 4; ++step) {
    auto g = torch::randn({n}) * 1e-2;
    adamw_update(p, g, m, v, decayed, step, lrs[step - 1], o);
    dev.begin(gpu, lrs[step - 1], step);
    adamw_update(pg, g.to(gpu), mg, vg, decayed, -1, -1, o, &dev);
  }
  EXPECT_TRUE(torch::allclose(pg.cpu(), p, 1e-5, 1e-6))
      << (pg.cpu() - p).abs().max().item<double>();
  EXPECT_TRUE(torch::allclose(mg.cpu(), m, 1e-5, 1e-9));
  EXPECT_TRUE(torch::allclose(vg.cpu(), v, 1e-5, 1e-12));
  // A skipped step (found_inf = 1, as fp16's scaler sets it) leaves everything as it was.
  const auto before = pg.clone();
  dev.begin(gpu, 1e-2, 5);
  adamw_update(pg, torch::randn({n}, gpu), mg, vg, decayed, -1, -1, o, &dev,
               torch::ones({}, torch::TensorOptions(gpu).dtype(at::kFloat)));
  EXPECT_TRUE(torch::equal(pg, before));
}

}  // namespace
}  // namespace lmtrain::optim
