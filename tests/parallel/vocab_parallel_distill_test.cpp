// Distillation's vocabulary-parallel loss (parallel/vocab_parallel_distill.h) on 2 Gloo ranks
// against one process's formula on whole logits (model::distill_loss_from_logits): soft-capped
// heads of different widths, masked targets, sequence-sharded student hidden states. Loss, kd,
// ce and the gradients of the hidden states and the head rows within 1e-6.
#include "parallel/vocab_parallel_distill.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "e2e/dist_harness.h"
#include "model/gpt.h"
#include "parallel/tp_layers.h"

namespace lmtrain::parallel {
namespace {

constexpr int kDistillRanks = 2;

TEST(VocabParallelDistill, EqualsOneProcessOnWholeLogitsWithMaskAndSoftcap) {
  torch::manual_seed(8);
  // Student (B, T_seq, Cs) = (2, 6, 8), head (V, Cs) = (10, 8); teacher (2, 6, 12), (10, 12).
  const auto hs0 = torch::randn({2, 6, 8}), ws0 = torch::randn({10, 8}) * 0.5;
  const auto ht = torch::randn({2, 6, 12}), wt = torch::randn({10, 12}) * 0.5;
  auto targets = torch::randint(0, 10, {2, 6}, torch::kLong);
  targets[0][2] = model::kIgnoreIndex;
  targets[1][5] = model::kIgnoreIndex;
  model::DistillLossSpec spec;
  spec.temperature = 2.0;
  spec.alpha = 0.6;
  spec.student_softcap = 3.0;
  spec.teacher_softcap = 4.0;

  auto hs = hs0.clone().requires_grad_(true), ws = ws0.clone().requires_grad_(true);
  auto cap = [](const at::Tensor& z, double c) { return c * at::tanh(z / c); };
  const auto flat = targets.reshape({-1});
  const auto keep = model::valid_target_rows(flat);
  const auto zs = cap(at::linear(hs.reshape({-1, 8}), ws), spec.student_softcap);
  const auto zt = cap(at::linear(ht.reshape({-1, 12}), wt), spec.teacher_softcap);
  const auto want = model::distill_loss_from_logits(
      zs.index_select(0, keep), zt.index_select(0, keep), flat.index_select(0, keep), spec);
  want.loss.backward();

  std::vector<std::vector<at::Tensor>> got(kDistillRanks);
  const auto errors = testing::run_ranks_in_process(kDistillRanks, [&](int r, dist::Group& g) {
    auto hr = hs0.chunk(kDistillRanks, 1)[r].clone().requires_grad_(true);             // (2, 3, 8)
    auto wr = train::shard_of(ws0, 0, r, kDistillRanks).clone().requires_grad_(true);  // (5, 8)
    const auto d = vocab_parallel_distill_loss(hr, wr, ht, wt, targets, spec, g);
    d.loss.backward();
    got[r] = {d.loss.detach(), d.kd, d.ce, hr.grad(), wr.grad()};
  });
  for (int r = 0; r < kDistillRanks; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    const std::string at = "rank " + std::to_string(r);
    EXPECT_NEAR(got[r][0].item<double>(), want.loss.item<double>(), 1e-6) << at;
    EXPECT_NEAR(got[r][1].item<double>(), want.kd.item<double>(), 1e-6) << at;
    EXPECT_NEAR(got[r][2].item<double>(), want.ce.item<double>(), 1e-6) << at;
    EXPECT_TRUE(torch::allclose(got[r][3], hs.grad().chunk(kDistillRanks, 1)[r], 1e-6, 1e-6)) << at;
    EXPECT_TRUE(
        torch::allclose(got[r][4], train::shard_of(ws.grad(), 0, r, kDistillRanks), 1e-6, 1e-6))
        << at;
  }
}

}  // namespace
}  // namespace lmtrain::parallel
