// fp16's loss scaler under ZeRO-3 with expert parallelism (dist.zero=3, dist.ep=2 on two Gloo
// ranks, threads of this process): each rank unscales and checks its gradient shard and its own
// experts, which ZeRO-3 keeps whole outside the shard (parallel/moe_shard.h), and the skip is
// agreed over the world. Rank 1 alone overflows, in one expert stack, on step 1: both ranks skip
// it, and ZeRO-3 equals ZeRO-2 with EP bit for bit (losses, gradient norms, skip flags, the
// scale, parameters and Adam moments), in the host form and in the device form of the scaler
// (optim/loss_scaler.h). Compute is fp32 (the CLI takes fp16 on CUDA only); the scaler's rules
// do not depend on the compute dtype, and scaling by powers of two is exact.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/runtime.h"
#include "e2e/dist_harness.h"
#include "model/gpt.h"
#include "model_fixtures.h"
#include "optim/flat_params.h"
#include "optim/loss_scaler.h"
#include "optim/zero_adamw.h"
#include "parallel/expert_parallel.h"
#include "parallel/fully_shard.h"
#include "train/train_step.h"

namespace lmtrain::train {
namespace {

// What one rank of one run ends with, and saw per step.
struct ScalerRunResult {
  std::vector<double> losses, norms;
  std::vector<bool> skipped;
  LossScalerState scaler;
  std::vector<at::Tensor> state;  // shard, experts, then every moment (shard and experts)
};

// One rank of a 2-layer MoE model (4 experts, top-2; this rank holds experts [2 rank, 2 rank + 2)
// under dist.ep=2) trained `steps` steps of 2 micro-steps with ZeRO `stage` (2 or 3) and a loss
// scaler starting at 1024 with a window of 2; rank 1's first expert stack overflows on step 1.
ScalerRunResult run_expert_scaler_rank(model::Gpt model, dist::Group& world, int stage,
                                       bool device_scaler, const at::Tensor& data, int steps) {
  auto ep = make_expert_parallel(world, 2, 4);
  EXPECT_EQ(ep.placement.first, 2 * world.rank());
  model->set_expert_dispatcher(std::make_shared<AllToAllExpertDispatcher>(*ep.ep_group, 4));
  optim::FlatParams flat(*model, model->param_tags(), 16 * world.size());
  flat.set_expert_first(ep.placement.first);
  optim::AdamWOptions adam;
  adam.eps = 1e-6;
  adam.weight_decay = 0.1;  // the decay factor must be exactly 1 on the skipped step
  optim::ZeroAdamW opt(flat, adam, world, stage, ep.ep_group.get());
  opt.use_device_scalars();  // both forms take the same Adam kernel
  std::unique_ptr<parallel::FullyShard> fsdp;
  if (stage == 3) {
    fsdp = std::make_unique<parallel::FullyShard>(*model, flat, world, nullptr, true, std::nullopt,
                                                  /*local_experts=*/true);
    fsdp->install();
  }
  LossScaler scaler(true, 1024, 2);
  if (device_scaler) scaler.keep_on_device(torch::kCPU);
  TrainStepper stepper(*model, flat, opt, world, core::Runtime::cpu(), 1, 3, 1 << 12, scaler, &ep,
                       fsdp.get());
  int step = 0;
  auto experts = model->named_parameters()["transformer.h.0.mlp.experts.c_fc.weight"];
  experts.register_hook([&step, &world](const torch::Tensor& g) {
    return world.rank() == 1 && step == 1 ? g * INFINITY : g;
  });
  const int64_t accum = 2;
  ScalerRunResult out;
  for (; step < steps; ++step) {
    auto r = stepper.step(
        accum,
        [&](int64_t m) {
          auto b = data[step * accum + m];
          return std::make_pair(b.narrow(1, 0, 12), b.narrow(1, 1, 12));
        },
        1e-2, 0.5);
    out.losses.push_back(r.loss_value());
    out.norms.push_back(r.grad_norm_value());
    out.skipped.push_back(r.skipped_value() > 0);
  }
  out.scaler = stepper.loss_scaler().state();
  out.state = {flat.param_slice(opt.shard_begin(), opt.shard_end() - opt.shard_begin()).clone(),
               flat.expert_params().clone()};
  for (const auto& [name, t] : opt.state_tensors()) out.state.push_back(t.clone());
  for (const auto& [name, t] : opt.expert_state()) out.state.push_back(t.clone());
  return out;
}

// Both ranks of one run; the models are made here, before the threads (they share the RNG).
std::vector<ScalerRunResult> run_expert_scaler(int stage, bool device_scaler,
                                               const at::Tensor& data, int steps) {
  const auto cfg = model::tiny_moe_config(model::MlpKind::kSwiGlu, 4, 2, 16);
  std::vector<model::Gpt> models;
  for (int64_t r = 0; r < 2; ++r) {
    torch::manual_seed(3);
    models.emplace_back(cfg, true, model::ExpertPlacement{2 * r, 2});
  }
  std::vector<ScalerRunResult> out(2);
  const auto errors = testing::run_ranks_in_process(2, [&](int rank, dist::Group& world) {
    out[rank] =
        run_expert_scaler_rank(models[rank], world, stage, device_scaler, data[rank], steps);
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  return out;
}

TEST(Zero3ExpertScaler, SkipsTogetherAndEqualsZero2BitwiseInBothForms) {
  const int steps = 4;
  torch::manual_seed(5);
  const auto data = torch::randint(64, {2, steps * 2, 3, 13}, torch::kLong);  // per rank
  const std::vector<bool> want_skipped = {false, true, false, false};
  for (bool device : {false, true}) {
    SCOPED_TRACE(device ? "device form" : "host form");
    const auto z2 = run_expert_scaler(2, device, data, steps);
    const auto z3 = run_expert_scaler(3, device, data, steps);
    for (int r = 0; r < 2; ++r) {
      SCOPED_TRACE("rank " + std::to_string(r));
      EXPECT_EQ(z3[r].skipped, want_skipped);
      EXPECT_EQ(z2[r].skipped, want_skipped);
      EXPECT_TRUE(std::isinf(z3[r].norms[1]));
      EXPECT_EQ(z3[r].losses, z2[r].losses);
      EXPECT_EQ(z3[r].norms, z2[r].norms);
      // Halved at the skip, doubled after the two clean steps that follow.
      EXPECT_EQ(z3[r].scaler.scale, 1024);
      EXPECT_EQ(z3[r].scaler.skipped_steps, 1);
      ASSERT_EQ(z3[r].state.size(), z2[r].state.size());
      for (size_t i = 0; i < z3[r].state.size(); ++i) {
        EXPECT_TRUE(torch::equal(z3[r].state[i], z2[r].state[i])) << "#" << i;
      }
    }
  }
}

}  // namespace
}  // namespace lmtrain::train
