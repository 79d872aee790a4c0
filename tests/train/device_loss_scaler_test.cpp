// fp16's loss scaler in its device form (the scale, its counts and the found_inf flag as
// tensors; the optimizer's update skipped on the device: what CUDA runs and a CUDA graph
// captures) equals the host form bit for bit, on the CPU: the scaler's rules step by step, a
// training run with forced overflows (weights, Adam moments, counts, losses, norms), and ZeRO-2
// over two ranks where one rank alone overflows.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/runtime.h"
#include "distributed/group.h"
#include "e2e/dist_harness.h"
#include "model/gpt.h"
#include "model_fixtures.h"
#include "optim/adamw.h"
#include "optim/flat_params.h"
#include "optim/loss_scaler.h"
#include "optim/zero_adamw.h"
#include "train/train_step.h"

namespace lmtrain::train {
namespace {

void expect_same_state(const LossScalerState& a, const LossScalerState& b, const char* where) {
  EXPECT_EQ(a.scale, b.scale) << where;
  EXPECT_EQ(a.good_steps, b.good_steps) << where;
  EXPECT_EQ(a.skipped_steps, b.skipped_steps) << where;
}

LossScaler on_cpu_device(LossScaler s) {
  s.keep_on_device(torch::kCPU);
  return s;
}

TEST(LossScalerDevice, FollowsTheHostRulesStepByStep) {
  LossScaler host(true, 1024, 3);
  LossScaler dev = on_cpu_device(LossScaler(true, 1024, 3));
  auto group = dist::make_single_rank_group();
  // Overflow pattern: halvings, growth after 3 clean steps, an overflow mid-window.
  const std::vector<bool> overflow = {false, true,  false, false, false, false, true, true,
                                      false, false, true,  false, false, false, false};
  for (size_t i = 0; i < overflow.size(); ++i) {
    auto g = torch::tensor({1024.0f, -3.0f, 0.5f});
    if (overflow[i]) g[1] = i % 2 ? INFINITY : NAN;
    auto gh = g.clone(), gd = g.clone();
    const bool found = host.unscale_and_check(gh, *group);
    const auto& flag = dev.unscale_and_check_on_device(gd, *group);
    EXPECT_EQ(found, overflow[i]) << "step " << i;
    EXPECT_EQ(flag.item<float>(), overflow[i] ? 1.0f : 0.0f) << "step " << i;
    if (!found) {
      EXPECT_TRUE(torch::equal(gh, gd)) << "step " << i;
    }
    host.update(found);
    dev.update_on_device();
    expect_same_state(host.state(), dev.state(), "after a step");
  }
  EXPECT_EQ(host.state().skipped_steps, 4);
  EXPECT_EQ(dev.scale(), 256);  // 1024 /2 *2 /2 /2 /2 *2

  // A checkpoint of a run with a longer window: its count is past ours, so the next clean step
  // grows, in both forms.
  const LossScalerState saved{64, 10, 7};
  host.restore(saved);
  dev.restore(saved);
  host.update(false);
  auto g = torch::ones({2});
  dev.unscale_and_check_on_device(g, *group);
  dev.update_on_device();
  expect_same_state(host.state(), dev.state(), "after a restore");
  EXPECT_EQ(dev.scale(), 128);
  EXPECT_EQ(dev.state().skipped_steps, 7);

  // Growth stops at the top of float32's range (2^127 * 2 is no float32), in both forms.
  LossScaler top_h(true, std::ldexp(1.0, 127), 1);
  LossScaler top_d = on_cpu_device(LossScaler(true, std::ldexp(1.0, 127), 1));
  top_h.update(false);
  auto one = torch::ones({1});
  top_d.unscale_and_check_on_device(one, *group);
  top_d.update_on_device();
  EXPECT_EQ(top_h.scale(), std::ldexp(1.0, 127));
  expect_same_state(top_h.state(), top_d.state(), "at float32's top");
}

TEST(LossScalerDevice, ScalesTheLossAsTheHostFormAndRoundsToFloat32) {
  LossScaler host(true, 0.1, 5);
  LossScaler dev = on_cpu_device(LossScaler(true, 0.1, 5));
  EXPECT_EQ(host.scale(), static_cast<double>(0.1f));
  EXPECT_EQ(dev.scale(), host.scale());
  const auto loss = torch::tensor(3.7f);
  EXPECT_TRUE(torch::equal(host.scale_loss(loss), dev.scale_loss(loss)));
  LossScaler off(false, 1024, 3);
  EXPECT_THROW(off.keep_on_device(torch::kCPU), Error);
  EXPECT_THROW(dev.keep_on_device(torch::kCPU), Error);  // once
}

// One replica of a tiny model with AdamW (replicated or ZeRO) on the CPU's device-scalar path,
// so that a host-form and a device-form run take the same Adam kernel.
struct Rig {
  model::Gpt model{nullptr};
  std::unique_ptr<optim::FlatParams> flat;
  std::unique_ptr<optim::Optimizer> opt;
  std::unique_ptr<TrainStepper> stepper;
  std::set<int> inject_at;  // steps whose wte gradient turns inf
  int step = 0;

  // `m`: made by make_scaler_model(), before any rank's thread starts (they must not share the
  // RNG).
  Rig(model::Gpt m, bool device_scaler, dist::Group& group, int zero_stage) : model(std::move(m)) {
    flat = std::make_unique<optim::FlatParams>(
        *model, [&](const std::string& n) { return model->decays(n); }, 16 * group.size());
    optim::AdamWOptions adam;
    adam.weight_decay = 0.1;  // the decay factor must be exactly 1 on a skipped step
    if (zero_stage > 0) {
      opt = std::make_unique<optim::ZeroAdamW>(*flat, adam, group, zero_stage);
    } else {
      opt = std::make_unique<optim::AdamW>(*flat, adam);
    }
    opt->use_device_scalars();
    LossScaler scaler(true, 1024, 2);
    if (device_scaler) scaler.keep_on_device(torch::kCPU);
    stepper = std::make_unique<TrainStepper>(*model, *flat, *opt, group, core::Runtime::cpu(), 1, 3,
                                             1 << 20, scaler);
    model->transformer->wte->weight.register_hook(
        [this](const torch::Tensor& g) { return inject_at.count(step) ? g * INFINITY : g; });
  }

  // One step on rows of `data` (steps * accum, B, T + 1) for this step.
  StepResult run_step(const torch::Tensor& data, int64_t accum) {
    auto r = stepper->step(
        accum,
        [&](int64_t m) {
          auto b = data[step * accum + m];
          return std::make_pair(b.narrow(1, 0, 12), b.narrow(1, 1, 12));
        },
        1e-2, 1.0);
    ++step;
    return r;
  }
};

model::Gpt make_scaler_model() {
  torch::manual_seed(11);
  return model::Gpt(model::tiny_gpt_config(16, 64, 16));
}

// The optimizer's whole state, flat: parameters then moments.
std::vector<torch::Tensor> optimizer_state(const Rig& rig) {
  std::vector<torch::Tensor> out{rig.flat->params().clone()};
  for (const auto& [name, t] : rig.opt->state_tensors()) out.push_back(t.clone());
  return out;
}

void expect_equal_states(const Rig& a, const Rig& b, const std::string& where) {
  const auto sa = optimizer_state(a), sb = optimizer_state(b);
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t i = 0; i < sa.size(); ++i)
    EXPECT_TRUE(torch::equal(sa[i], sb[i])) << where << " #" << i;
}

TEST(LossScalerDevice, SkipsOnTheDeviceAsTheHostSkipsOverARun) {
  auto group = dist::make_single_rank_group();
  Rig host(make_scaler_model(), false, *group, 0), dev(make_scaler_model(), true, *group, 0);
  // Overflows on steps 0, 3 and 4 (two in a row); window 2: the scale grows in between.
  for (auto* rig : {&host, &dev}) rig->inject_at = {0, 3, 4};
  torch::manual_seed(5);
  const int steps = 10;
  const int64_t accum = 2;
  const auto data = torch::randint(64, {steps * accum, 5, 13}, torch::kLong);
  for (int s = 0; s < steps; ++s) {
    const auto before = optimizer_state(dev);
    const auto rh = host.run_step(data, accum), rd = dev.run_step(data, accum);
    const std::string where = "step " + std::to_string(s);
    ASSERT_EQ(rh.skipped_value(), rd.skipped_value()) << where;
    EXPECT_EQ(rd.skipped_value(), host.inject_at.count(s) == 1) << where;
    EXPECT_EQ(rh.loss_value(), rd.loss_value()) << where;
    EXPECT_EQ(rh.grad_norm_value(), rd.grad_norm_value()) << where;
    expect_same_state(host.stepper->loss_scaler().state(), dev.stepper->loss_scaler().state(),
                      where.c_str());
    expect_equal_states(host, dev, where);
    if (rd.skipped_value()) {
      EXPECT_TRUE(std::isinf(rd.grad_norm_value())) << where;
      const auto after = optimizer_state(dev);
      for (size_t i = 0; i < after.size(); ++i) {
        EXPECT_TRUE(torch::equal(after[i], before[i]))
            << where << ": a skipped step changed #" << i;
      }
    }
  }
  EXPECT_EQ(dev.stepper->loss_scaler().state().skipped_steps, 3);
  EXPECT_EQ(dev.stepper->loss_scaler().scale(), host.stepper->loss_scaler().scale());
  EXPECT_EQ(host.opt->step_count(), steps - 3);
  EXPECT_EQ(dev.opt->step_count(), steps - 3);  // read from the device's count of skips
  EXPECT_EQ(dev.opt->steps_started(), steps);
}

// ZeRO-1 and ZeRO-2 over two ranks (threads, Gloo; both reduce-scatter their gradients, so a
// rank's buffer holds averaged values only in its shard): rank 1 alone overflows on step 1; the
// flag's MAX over the group makes both ranks skip, in the device form as in the host form.
void zero_ranks_skip_together(int stage) {
  SCOPED_TRACE("ZeRO-" + std::to_string(stage));
  torch::manual_seed(5);
  const int steps = 4;
  const int64_t accum = 1;
  const auto data = torch::randint(64, {2, steps * accum, 4, 13}, torch::kLong);
  // [form][rank]: the state after the run, and each step's skip flag.
  std::vector<std::vector<std::vector<torch::Tensor>>> state(
      2, std::vector<std::vector<torch::Tensor>>(2));
  std::vector<std::vector<std::vector<bool>>> skipped(2, std::vector<std::vector<bool>>(2));
  std::vector<std::vector<int64_t>> counts(2, std::vector<int64_t>(2));
  for (int form = 0; form < 2; ++form) {
    std::vector<model::Gpt> models = {make_scaler_model(), make_scaler_model()};
    const auto errors = testing::run_ranks_in_process(2, [&](int rank, dist::Group& group) {
      Rig rig(models[rank], form == 1, group, stage);
      if (rank == 1) rig.inject_at = {1};
      for (int s = 0; s < steps; ++s) {
        skipped[form][rank].push_back(rig.run_step(data[rank], accum).skipped_value());
      }
      state[form][rank] = optimizer_state(rig);
      counts[form][rank] = rig.opt->step_count();
    });
    for (int r = 0; r < 2; ++r) ASSERT_EQ(errors[r], "") << "form " << form << " rank " << r;
  }
  const std::vector<bool> want = {false, true, false, false};
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(skipped[0][r], want) << "host form, rank " << r;
    EXPECT_EQ(skipped[1][r], want) << "device form, rank " << r;
    EXPECT_EQ(counts[1][r], steps - 1) << "rank " << r;
    ASSERT_EQ(state[0][r].size(), state[1][r].size());
    for (size_t i = 0; i < state[0][r].size(); ++i) {
      EXPECT_TRUE(torch::equal(state[0][r][i], state[1][r][i])) << "rank " << r << " #" << i;
    }
  }
  EXPECT_TRUE(torch::equal(state[1][0][0], state[1][1][0])) << "ranks' parameters differ";
}

TEST(LossScalerDevice, ZeroOneAndTwoRanksSkipTogetherAsTheHostForm) {
  zero_ranks_skip_together(1);
  zero_ranks_skip_together(2);
}

}  // namespace
}  // namespace lmtrain::train
