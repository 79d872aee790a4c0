// fp16's loss scaler under tensor parallelism (dist.tp=2 on two Gloo ranks, threads of this
// process) against one process: each TP rank unscales and checks its own slices, so an
// overflow in one rank's slice must be agreed over the TP group (TrainStepper::update), or that
// rank alone would skip the step and the ranks' copies of the whole parameters would part.
// Rank 1's slice of an MLP weight overflows on step 1 (one process: the whole weight): both
// ranks skip it with one process, and the losses stay within 1e-6 relative of one process's at
// every step, the scale equal, the parameters (gathered whole) within 1e-5, in the host form and
// in the device form of the scaler (optim/loss_scaler.h). Compute is fp32 (the CLI takes fp16
// on CUDA only); the scaler's rules do not depend on the compute dtype, and scaling by powers
// of two is exact. A Qwen3-style model (no biases: Adam would turn the key bias's rounding
// noise into full steps).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/runtime.h"
#include "distributed/group.h"
#include "e2e/dist_harness.h"
#include "model/gpt.h"
#include "model_fixtures.h"
#include "optim/adamw.h"
#include "optim/flat_params.h"
#include "optim/loss_scaler.h"
#include "parallel/tensor_parallel_plan.h"
#include "train/train_step.h"

namespace lmtrain::train {
namespace {

constexpr int kTpScalerSteps = 4;
const char* const kTpScalerOverflowing = "transformer.h.0.mlp.c_fc.weight";

struct TpScalerRun {
  std::vector<double> losses;
  std::vector<bool> skipped;
  LossScalerState scaler;
  std::map<std::string, at::Tensor> params;  // whole, after the steps
};

// `tp_group` null: one process. The weight overflows on step 1 in one process, and on TP rank 1
// only (its rows of the weight) under TP.
TpScalerRun tp_scaler_steps(model::Gpt& m, const at::Tensor& data, dist::Group* tp_group,
                            bool device_scaler) {
  std::unique_ptr<parallel::TensorParallel> tp;
  if (tp_group) tp = std::make_unique<parallel::TensorParallel>(*m, *tp_group);
  optim::FlatParams flat(*m, m->param_tags());
  auto dp = dist::make_single_rank_group();
  optim::AdamWOptions adam;
  // eps well above the gradients' rounding noise: Adam's first steps would otherwise scale the
  // noise of the tiny gradients (summed in another order over the ranks) to about lr.
  adam.eps = 1e-3;
  adam.weight_decay = 0.1;  // the decay factor must be exactly 1 on the skipped step
  optim::AdamW opt(flat, adam);
  opt.use_device_scalars();  // both forms take the same Adam kernel
  LossScaler scaler(true, 1024, 2);
  if (device_scaler) scaler.keep_on_device(torch::kCPU);
  TrainStepper stepper(*m, flat, opt, *dp, core::Runtime::cpu(), 1, 3, 1 << 12, scaler);
  if (tp) stepper.use_tensor_parallel(*tp, *tp_group, *dp);
  int step = 0;
  const bool overflows = !tp_group || tp_group->rank() == 1;
  auto weight = m->named_parameters()[kTpScalerOverflowing];
  weight.register_hook([&step, overflows](const torch::Tensor& g) {
    return overflows && step == 1 ? g * INFINITY : g;
  });
  TpScalerRun out;
  for (; step < kTpScalerSteps; ++step) {
    auto r = stepper.step(
        2,
        [&](int64_t micro) {
          auto b = data[step * 2 + micro];  // (3, 13): the same windows on every TP rank
          return std::make_pair(b.narrow(1, 0, 12), b.narrow(1, 1, 12));
        },
        1e-2, 0.5);
    out.losses.push_back(r.loss_value());
    out.skipped.push_back(r.skipped_value() > 0);
  }
  out.scaler = stepper.loss_scaler().state();
  if (tp) tp->gather_whole();
  for (const auto& p : m->named_parameters()) out.params[p.key()] = p.value().detach().clone();
  if (tp) tp->release_whole();
  return out;
}

TEST(TpLossScaler, SkipsTogetherAndEqualsOneProcessInBothForms) {
  auto cfg = model::with_llama_family(model::tiny_gpt_config(32, 64, 16), model::Arch::kQwen3);
  cfg.n_head = 4;
  cfg.n_kv_head = 2;
  torch::manual_seed(5);
  const auto data = torch::randint(cfg.vocab_size, {kTpScalerSteps * 2, 3, 13}, torch::kLong);
  const std::vector<bool> want_skipped = {false, true, false, false};
  for (bool device : {false, true}) {
    SCOPED_TRACE(device ? "device form" : "host form");
    std::vector<model::Gpt> models;
    for (int i = 0; i < 3; ++i) {  // built up front: the global RNG is not for two threads
      torch::manual_seed(3);
      models.emplace_back(cfg);
      models.back()->train();
    }
    const auto want = tp_scaler_steps(models[0], data, nullptr, device);
    ASSERT_EQ(want.skipped, want_skipped);
    std::vector<TpScalerRun> got(2);
    const auto errors = testing::run_ranks_in_process(2, [&](int r, dist::Group& group) {
      got[r] = tp_scaler_steps(models[1 + r], data, &group, device);
    });
    for (int r = 0; r < 2; ++r) {
      SCOPED_TRACE("rank " + std::to_string(r));
      ASSERT_EQ(errors[r], "");
      EXPECT_EQ(got[r].skipped, want_skipped);
      // Halved at the skip, doubled after the two clean steps that follow.
      EXPECT_EQ(got[r].scaler.scale, 1024);
      EXPECT_EQ(got[r].scaler.skipped_steps, 1);
      for (int s = 0; s < kTpScalerSteps; ++s) {
        EXPECT_NEAR(got[r].losses[s], want.losses[s], 1e-6 * want.losses[s]) << "step " << s;
      }
      for (const auto& [name, w] : want.params) {
        const auto& g = got[r].params.at(name);
        ASSERT_EQ(g.sizes(), w.sizes()) << name;
        const double scale = std::max(w.abs().max().item<double>(), 1e-12);
        EXPECT_LE((g - w).abs().max().item<double>() / scale, 1e-5) << name;
      }
    }
  }
}

}  // namespace
}  // namespace lmtrain::train
