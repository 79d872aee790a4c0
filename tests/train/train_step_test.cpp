// The split (multi-worker) step must match the single-worker step and be deterministic; fp16
// loss scaling skips overflowing steps, halves and grows the scale, and otherwise changes
// nothing (power-of-two scaling is exact).
#include "train/train_step.h"

#include <gtest/gtest.h>

#include "core/runtime.h"
#include "distributed/group.h"
#include "model/gpt.h"
#include "model_fixtures.h"
#include "optim/adamw.h"
#include "optim/flat_params.h"

namespace lmtrain::train {
namespace {

struct StepperRig {
  model::Gpt model{nullptr};
  std::unique_ptr<optim::FlatParams> flat;
  std::unique_ptr<optim::AdamW> opt;
  std::unique_ptr<dist::Group> group = dist::make_single_rank_group();
  std::unique_ptr<TrainStepper> stepper;

  explicit StepperRig(int workers, LossScaler scaler = LossScaler(false, 1, 1)) {
    torch::manual_seed(11);
    model = model::Gpt(model::tiny_gpt_config(16, 64, 16));
    flat = std::make_unique<optim::FlatParams>(
        *model, [&](const std::string& n) { return model->decays(n); });
    // eps 1e-6: equivalence across different summation orders (see DEVELOPERS.md: Adam at 1e-8
    // turns the key bias's rounding-noise gradient into full-lr steps of random sign).
    optim::AdamWOptions adam;
    adam.eps = 1e-6;
    opt = std::make_unique<optim::AdamW>(*flat, adam);
    stepper = std::make_unique<TrainStepper>(*model, *flat, *opt, *group, core::Runtime::cpu(),
                                             workers, 3, 1 << 20, scaler);
  }

  std::vector<double> run(int steps, int64_t accum, std::vector<bool>* skipped = nullptr) {
    std::vector<double> losses;
    torch::manual_seed(5);
    std::vector<torch::Tensor> data;
    for (int i = 0; i < steps * accum; ++i)
      data.push_back(torch::randint(64, {5, 13}, torch::kLong));
    for (int s = 0; s < steps; ++s) {
      auto r = stepper->step(
          accum,
          [&](int64_t m) {
            auto& b = data[s * accum + m];
            return std::make_pair(b.narrow(1, 0, 12), b.narrow(1, 1, 12));
          },
          1e-2, 1.0);
      losses.push_back(r.loss_value());
      if (skipped) skipped->push_back(r.skipped_value());
    }
    return losses;
  }
};

TEST(TrainStepper, SplitAcrossWorkersMatchesSingleWorker) {
  // 5 rows over 3 workers: unequal slices (1, 2, 2) exercise the row weighting.
  for (int workers : {2, 3}) {
    StepperRig one(1), split(workers);
    auto l1 = one.run(6, 2), l2 = split.run(6, 2);
    for (size_t i = 0; i < l1.size(); ++i) EXPECT_NEAR(l1[i], l2[i], 1e-5) << "step " << i;
    auto diff = (one.flat->params() - split.flat->params()).abs().max().item<double>();
    auto scale = one.flat->params().abs().max().item<double>();
    EXPECT_LT(diff / scale, 1e-5) << "workers=" << workers;
  }
}

TEST(TrainStepper, SplitStepIsDeterministic) {
  StepperRig a(2), b(2);
  auto la = a.run(4, 1), lb = b.run(4, 1);
  EXPECT_EQ(la, lb);
  EXPECT_TRUE(torch::equal(a.flat->params(), b.flat->params()));
}

TEST(TrainStepper, MoreWorkersThanRowsLeavesIdleWorkers) {
  StepperRig one(1), many(8);
  auto l1 = one.run(2, 1), l8 = many.run(2, 1);
  EXPECT_NEAR(l1[1], l8[1], 1e-5);
}

TEST(LossScaler, HalvesOnOverflowAndGrowsAfterACleanWindow) {
  LossScaler s(true, 1024, 3);
  s.update(true);
  EXPECT_EQ(s.scale(), 512);
  EXPECT_EQ(s.state().skipped_steps, 1);
  s.update(false);
  s.update(false);
  EXPECT_EQ(s.scale(), 512);
  s.update(false);
  EXPECT_EQ(s.scale(), 1024);
  EXPECT_EQ(s.state().good_steps, 0);
  LossScaler off(false, 1024, 3);
  EXPECT_EQ(off.scale(), 1);
  auto g = torch::full({4}, INFINITY);
  auto group = dist::make_single_rank_group();
  EXPECT_FALSE(off.unscale_and_check(g, *group));  // disabled: nothing is checked
}

TEST(LossScaler, UnscalesExactlyAndFindsInfAndNan) {
  LossScaler s(true, 256, 10);
  auto group = dist::make_single_rank_group();
  auto g = torch::tensor({256.0f, -512.0f, 1.0f});
  EXPECT_FALSE(s.unscale_and_check(g, *group));
  EXPECT_TRUE(torch::equal(g, torch::tensor({1.0f, -2.0f, 1.0f / 256})));
  for (float bad : {INFINITY, -INFINITY, NAN}) {
    auto h = torch::tensor({1.0f, bad});
    EXPECT_TRUE(s.unscale_and_check(h, *group)) << bad;
  }
}

TEST(LossScaler, OverflowStepIsSkippedAndCleanStepsEqualUnscaledTraining) {
  // Same data and model; one rig scales the loss by 2^10, the other not at all.
  StepperRig plain(1), scaled(1, LossScaler(true, 1024, 2));
  // Make the first step's gradient overflow in the scaled rig only.
  bool inject = true;
  auto& w = scaled.model->transformer->wte->weight;
  w.register_hook([&inject](const torch::Tensor& g) {
    if (!inject) return g;
    inject = false;
    return g * INFINITY;
  });
  const auto before = scaled.flat->params().clone();
  std::vector<bool> skipped;
  scaled.run(1, 1, &skipped);
  ASSERT_EQ(skipped, std::vector<bool>{true});
  EXPECT_TRUE(torch::equal(scaled.flat->params(), before)) << "a skipped step changed weights";
  EXPECT_EQ(scaled.opt->step_count(), 0);
  EXPECT_EQ(scaled.stepper->loss_scaler().scale(), 512);
  // Clean steps: bitwise the unscaled run (scaling by a power of two is exact), and the scale
  // doubles after every 2 clean steps.
  skipped.clear();
  auto l_plain = plain.run(4, 2), l_scaled = scaled.run(4, 2, &skipped);
  EXPECT_EQ(skipped, std::vector<bool>(4, false));
  EXPECT_EQ(l_plain, l_scaled);
  EXPECT_TRUE(torch::equal(plain.flat->params(), scaled.flat->params()));
  EXPECT_EQ(scaled.stepper->loss_scaler().scale(), 2048);
  EXPECT_EQ(scaled.stepper->loss_scaler().state().skipped_steps, 1);
}

TEST(TrainStepper, ResolveWorkers) {
  EXPECT_EQ(resolve_workers(0, 2, 12), 2);
  EXPECT_EQ(resolve_workers(0, 4, 2), 2);
  EXPECT_EQ(resolve_workers(0, 1, 8), 1);
  EXPECT_EQ(resolve_workers(3, 1, 8), 3);
}

}  // namespace
}  // namespace lmtrain::train
