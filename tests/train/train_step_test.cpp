// The split (multi-worker) step must match the single-worker step and be deterministic.
#include "train/train_step.h"

#include <gtest/gtest.h>

#include "dist/group.h"
#include "model/gpt.h"
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

  explicit StepperRig(int workers) {
    model::GptConfig c;
    c.n_layer = 2;
    c.n_head = 2;
    c.n_embd = 16;
    c.vocab_size = 64;
    c.block_size = 16;
    torch::manual_seed(11);
    model = model::Gpt(c);
    flat = std::make_unique<optim::FlatParams>(
        *model, [&](const std::string& n) { return model->decays(n); });
    opt = std::make_unique<optim::AdamW>(*flat, optim::AdamWOptions{});
    stepper = std::make_unique<TrainStepper>(*model, *flat, *opt, *group, workers, 3, 1 << 20);
  }

  std::vector<double> run(int steps, int64_t accum) {
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
      losses.push_back(r.loss);
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

TEST(TrainStepper, ResolveWorkers) {
  EXPECT_EQ(resolve_workers(0, 2, 12), 2);
  EXPECT_EQ(resolve_workers(0, 4, 2), 2);
  EXPECT_EQ(resolve_workers(0, 1, 8), 1);
  EXPECT_EQ(resolve_workers(3, 1, 8), 3);
}

}  // namespace
}  // namespace lmtrain::train
