// The step's objective seam: masked targets are left out and the loss is normalised by the
// global count of valid tokens, so N ranks equal one rank on the same global batch even when
// the ranks hold different numbers of valid tokens; the same holds for distillation, whose
// teacher comes out of training bitwise unchanged.
#include "objective/objective.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <mutex>

#include "core/runtime.h"
#include "distill/distill_objective.h"
#include "e2e/dist_harness.h"
#include "model/gpt.h"
#include "model_fixtures.h"
#include "optim/adamw.h"
#include "optim/flat_params.h"
#include "train/train_step.h"

namespace lmtrain::train {
namespace {

constexpr int64_t kVocab = 48, kRows = 4, kT = 8;

model::GptConfig student_config(int64_t width = 16) {
  return model::tiny_gpt_config(width, kVocab, kT);
}

model::Gpt make_model(const model::GptConfig& c, uint64_t seed) {
  static std::mutex init_mutex;  // the global generator, from several rank threads
  std::lock_guard<std::mutex> lock(init_mutex);
  torch::manual_seed(seed);
  return model::Gpt(c);
}

// The global batch of step s: kRows rows of (inputs, targets); targets masked so that the rows
// hold 3, 8, 5 and 1 valid tokens (ranks of a 2-way split hold 11 and 6).
std::pair<at::Tensor, at::Tensor> global_batch(int s) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(100 + s);
  auto x = torch::randint(kVocab, {kRows, kT + 1}, gen, torch::kLong);
  auto inputs = x.narrow(1, 0, kT).clone(), targets = x.narrow(1, 1, kT).clone();
  const int64_t valid[kRows] = {3, 8, 5, 1};
  for (int64_t r = 0; r < kRows; ++r) {
    targets[r].narrow(0, valid[r], kT - valid[r]).fill_(model::kIgnoreIndex);
  }
  return {inputs, targets};
}

// Trains `steps` steps on this rank's rows of the global batch (world ranks, rows split evenly)
// and returns the flat parameters.
at::Tensor train(model::GptImpl& m, dist::Group& group, int workers, int steps,
                 std::shared_ptr<Objective> objective = nullptr,
                 std::vector<double>* losses = nullptr) {
  optim::FlatParams flat(trained_param_sources(m, objective.get()));
  optim::AdamWOptions adam;
  adam.eps = 1e-6;
  optim::AdamW opt(flat, adam);
  TrainStepper stepper(m, flat, opt, group, core::Runtime::cpu(), workers, 7, 1 << 12);
  stepper.set_masked_targets(true);
  if (objective) stepper.set_objective(objective);
  const int64_t per_rank = kRows / group.size();
  for (int s = 0; s < steps; ++s) {
    auto [x, y] = global_batch(s);
    auto r = stepper.step(
        1,
        [&](int64_t) {
          return Batch::with_mask(x.narrow(0, group.rank() * per_rank, per_rank),
                                  y.narrow(0, group.rank() * per_rank, per_rank));
        },
        1e-2, 1.0);
    if (losses) losses->push_back(r.loss_value());
  }
  return flat.params().clone();
}

TEST(Objective, LossIsTheMeanOverValidTokens) {
  auto m = make_model(student_config(), 3);
  auto [x, y] = global_batch(0);
  double expected = 0;
  {
    torch::NoGradGuard no_grad;
    auto logits = m->forward(x);
    expected = at::cross_entropy_loss(logits.reshape({-1, kVocab}), y.reshape({-1}))
                   .item<double>();  // ignore_index -100: the mean over the 17 valid targets
  }
  auto group = dist::make_single_rank_group();
  std::vector<double> losses;
  train(*m, *group, 1, 1, nullptr, &losses);
  EXPECT_NEAR(losses[0], expected, 1e-6);
}

TEST(Objective, MaskedRanksWithDifferentValidCountsEqualOneRank) {
  auto one = make_model(student_config(), 3);
  auto group = dist::make_single_rank_group();
  const auto baseline = train(*one, *group, 1, 3);
  // The same rows split over 2 workers (slices of different valid counts) on one rank.
  auto split = make_model(student_config(), 3);
  EXPECT_TRUE(at::allclose(train(*split, *group, 2, 3), baseline, 1e-5, 1e-6));
  std::vector<at::Tensor> result(2);
  auto errors = testing::run_ranks_in_process(2, [&](int rank, dist::Group& world) {
    auto m = make_model(student_config(), 3);
    result[rank] = train(*m, world, 1, 3);
  });
  for (size_t r = 0; r < errors.size(); ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
  const double diff = (result[0] - baseline).abs().max().item<double>();
  EXPECT_LT(diff, 1e-5) << "2 ranks vs 1 rank";
  EXPECT_TRUE(result[0].equal(result[1]));
}

TEST(Objective, UnmaskedStepRefusesMaskedBatch) {
  auto m = make_model(student_config(), 3);
  optim::FlatParams flat(*m, m->param_tags());
  optim::AdamW opt(flat, optim::AdamWOptions{});
  auto group = dist::make_single_rank_group();
  TrainStepper stepper(*m, flat, opt, *group, core::Runtime::cpu(), 1, 7, 1 << 12);
  auto [x, y] = global_batch(0);
  EXPECT_THROW(stepper.step(
                   1, [&](int64_t) { return Batch::with_mask(x, y); }, 1e-2, 1.0),
               std::exception);
}

// features: the feature term on both layers (student width 16, teacher 32: projected).
std::shared_ptr<DistillObjective> make_distill(uint64_t teacher_seed, bool chunked,
                                               bool features = false) {
  model::DistillLossSpec spec;
  spec.temperature = 2.0;
  spec.alpha = 0.7;
  spec.chunk_rows = 5;
  FeatureDistillSpec f;
  if (features) {
    f.features = {{0, 0}, {1, 1}};
    f.feature_weight = 0.3;
    f.student_width = 16;
    f.teacher_width = 32;
  }
  return std::make_shared<DistillObjective>(make_model(student_config(32), teacher_seed), spec,
                                            chunked, f, 21);
}

TEST(Objective, DistillationOnTwoRanksEqualsOneAndLeavesTheTeacherUnchanged) {
  auto group = dist::make_single_rank_group();
  auto objective = make_distill(9, true);
  std::vector<at::Tensor> before;
  for (const auto& p : objective->teacher().parameters()) before.push_back(p.clone());
  auto one = make_model(student_config(), 3);
  std::vector<double> losses;
  const auto baseline = train(*one, *group, 1, 3, objective, &losses);
  const auto after = objective->teacher().parameters();
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_TRUE(after[i].equal(before[i])) << "teacher parameter " << i;
    EXPECT_FALSE(after[i].grad().defined()) << "teacher parameter " << i << " got a gradient";
  }
  // Full logits (unchunked) give the same training.
  auto unchunked = make_model(student_config(), 3);
  EXPECT_TRUE(
      at::allclose(train(*unchunked, *group, 1, 3, make_distill(9, false)), baseline, 1e-5, 1e-6));
  std::vector<at::Tensor> result(2);
  auto errors = testing::run_ranks_in_process(2, [&](int rank, dist::Group& world) {
    auto m = make_model(student_config(), 3);
    result[rank] = train(*m, world, 1, 3, make_distill(9, true));
  });
  for (size_t r = 0; r < errors.size(); ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
  EXPECT_LT((result[0] - baseline).abs().max().item<double>(), 1e-5) << "2 ranks vs 1 rank";
  // Distillation trains a different model than plain cross-entropy.
  auto plain = make_model(student_config(), 3);
  EXPECT_GT((train(*plain, *group, 1, 3) - baseline).abs().max().item<double>(), 1e-4);
  for (double l : losses) EXPECT_TRUE(std::isfinite(l));
}

TEST(Objective, FeatureDistillationOnTwoRanksEqualsOneAndTrainsTheProjections) {
  // The flat buffers hold the student's parameters and the objective's two (32, 16)
  // projections; 2 ranks (different valid-token counts) train both as 1 rank does.
  auto group = dist::make_single_rank_group();
  auto objective = make_distill(9, true, true);
  const auto initial = objective->projections().named_parameters()["feature_0"].clone();
  auto one = make_model(student_config(), 3);
  const auto baseline = train(*one, *group, 1, 3, objective);
  const auto trained = objective->projections().named_parameters()["feature_0"];
  EXPECT_GT((trained - initial).abs().max().item<double>(), 1e-4);
  // The projections come first in the flat buffers (the last source, first in backward order).
  EXPECT_EQ(baseline.numel(),
            optim::FlatParams(trained_param_sources(*one, objective.get())).params().numel());
  std::vector<at::Tensor> result(2);
  auto errors = testing::run_ranks_in_process(2, [&](int rank, dist::Group& world) {
    auto m = make_model(student_config(), 3);
    result[rank] = train(*m, world, 1, 3, make_distill(9, true, true));
  });
  for (size_t r = 0; r < errors.size(); ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
  EXPECT_LT((result[0] - baseline).abs().max().item<double>(), 1e-5) << "2 ranks vs 1 rank";
  EXPECT_TRUE(result[0].equal(result[1]));
  // 2 split-batch workers too.
  auto split = make_model(student_config(), 3);
  EXPECT_LT((train(*split, *group, 2, 3, make_distill(9, true, true)) - baseline)
                .abs()
                .max()
                .item<double>(),
            1e-5);
  // Without the feature term the student trains differently (its layout is baseline's tail).
  auto plain = make_model(student_config(), 3);
  auto without = train(*plain, *group, 1, 3, make_distill(9, true));
  EXPECT_GT((without - baseline.narrow(0, baseline.numel() - without.numel(), without.numel()))
                .abs()
                .max()
                .item<double>(),
            1e-4);
}

TEST(Objective, Bf16TeacherGivesTheFp32TeachersLossClosely) {
  // distill.teacher_dtype=bf16: the teacher's weights and forward in bf16, the loss in fp32.
  auto student = make_model(student_config(), 3);
  auto [x, y] = global_batch(0);
  auto batch = Batch::with_mask(x, y);
  auto fp32 = make_distill(9, true);
  auto bf16 = make_distill(9, true);
  bf16->teacher().to(torch::kBFloat16);
  const double a = fp32->compute(*student, batch).loss.item<double>();
  auto out = bf16->compute(*student, batch);
  EXPECT_EQ(out.loss.scalar_type(), torch::kFloat);
  EXPECT_NEAR(out.loss.item<double>(), a, 2e-2 * a);
  EXPECT_NE(out.loss.item<double>(), a);  // it did run in bf16
}

}  // namespace
}  // namespace lmtrain::train
