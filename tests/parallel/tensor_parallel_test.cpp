// Tensor parallelism's building blocks on 2 Gloo ranks against libtorch on one (issue 42): a
// column-parallel then row-parallel pair (an MLP), with and without sequence parallelism, the
// vocabulary-parallel embedding, and the vocabulary-parallel cross-entropy: outputs and every
// gradient within 1e-6 of the unsplit computation.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "e2e/dist_harness.h"
#include "parallel/tp_layers.h"
#include "parallel/tp_regions.h"
#include "parallel/vocab_parallel_loss.h"

namespace lmtrain::train {
namespace {

constexpr int kRanks = 2;

void expect_close(const at::Tensor& got, const at::Tensor& want, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  EXPECT_TRUE(torch::allclose(got, want, 1e-6, 1e-6))
      << what << ": max diff " << (got - want).abs().max().item<double>();
}

struct Mlp {
  at::Tensor x, w1, b1, w2, b2, probe;  // x (B, T, C); w1 (F, C); w2 (C, F); probe ~ y
};

Mlp make_mlp() {
  torch::manual_seed(3);
  return {torch::randn({2, 8, 6}),     torch::randn({12, 6}) * 0.3, torch::randn({12}) * 0.1,
          torch::randn({6, 12}) * 0.3, torch::randn({6}) * 0.1,     torch::randn({2, 8, 6})};
}

class TensorParallel : public ::testing::TestWithParam<bool> {};

TEST_P(TensorParallel, ColumnThenRowParallelEqualsTheWholeMlp) {
  const bool sp = GetParam();
  const auto m = make_mlp();
  // One process: y = W2 gelu(W1 x + b1) + b2, and the gradients of sum(y * probe).
  auto x = m.x.clone().requires_grad_(true), w1 = m.w1.clone().requires_grad_(true),
       b1 = m.b1.clone().requires_grad_(true), w2 = m.w2.clone().requires_grad_(true),
       b2 = m.b2.clone().requires_grad_(true);
  const auto y = at::linear(at::gelu(at::linear(x, w1, b1)), w2, b2);
  (y * m.probe).sum().backward();

  std::vector<std::vector<at::Tensor>> got(kRanks);
  const auto errors = testing::run_ranks_in_process(kRanks, [&](int r, dist::Group& g) {
    // Sequence parallel: this rank holds tokens [r * 4, r * 4 + 4) of the 8 (dim 1).
    auto xr = (sp ? m.x.chunk(kRanks, 1)[r] : m.x).clone().requires_grad_(true);
    auto w1r = shard_of(m.w1, 0, r, kRanks).clone().requires_grad_(true);
    auto b1r = shard_of(m.b1, 0, r, kRanks).clone().requires_grad_(true);
    auto w2r = shard_of(m.w2, 1, r, kRanks).clone().requires_grad_(true);
    auto b2r = m.b2.clone().requires_grad_(true);
    const auto h = at::gelu(column_parallel_linear(xr, w1r, b1r, g, sp));  // (B, 8, F / 2)
    const auto yr = row_parallel_linear(h, w2r, b2r, g, sp);
    const auto probe = sp ? m.probe.chunk(kRanks, 1)[r] : m.probe;
    (yr * probe).sum().backward();
    got[r] = {yr.detach(), xr.grad(), w1r.grad(), b1r.grad(), w2r.grad(), b2r.grad()};
  });
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    const std::string at = "rank " + std::to_string(r);
    expect_close(got[r][0], sp ? y.detach().chunk(kRanks, 1)[r] : y.detach(), at + " output");
    expect_close(got[r][1], sp ? x.grad().chunk(kRanks, 1)[r] : x.grad(), at + " input grad");
    expect_close(got[r][2], shard_of(w1.grad(), 0, r, kRanks), at + " column weight grad");
    expect_close(got[r][3], shard_of(b1.grad(), 0, r, kRanks), at + " column bias grad");
    expect_close(got[r][4], shard_of(w2.grad(), 1, r, kRanks), at + " row weight grad");
    // The row bias is replicated: with sequence parallelism each rank saw half the tokens.
    expect_close(sp ? got[0][5] + got[1][5] : got[r][5], b2.grad(), at + " row bias grad");
  }
}

TEST_P(TensorParallel, VocabParallelEmbeddingEqualsTheWholeTable) {
  const bool sp = GetParam();
  torch::manual_seed(4);
  const auto table = torch::randn({10, 4});
  const auto ids = torch::randint(0, 10, {2, 6}, torch::kLong);
  const auto probe = torch::randn({2, 6, 4});
  auto whole = table.clone().requires_grad_(true);
  const auto y = at::embedding(whole, ids);
  (y * probe).sum().backward();
  std::vector<std::vector<at::Tensor>> got(kRanks);
  const auto errors = testing::run_ranks_in_process(kRanks, [&](int r, dist::Group& g) {
    auto shard = shard_of(table, 0, r, kRanks).clone().requires_grad_(true);
    const auto yr = vocab_parallel_embedding(ids, shard, g, sp);
    ((yr * (sp ? probe.chunk(kRanks, 1)[r] : probe)).sum()).backward();
    got[r] = {yr.detach(), shard.grad()};
  });
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    expect_close(got[r][0], sp ? y.detach().chunk(kRanks, 1)[r] : y.detach(), "lookup");
    expect_close(got[r][1], shard_of(whole.grad(), 0, r, kRanks), "table grad");
  }
}

INSTANTIATE_TEST_SUITE_P(SequenceParallel, TensorParallel, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Sequence" : "Plain"; });

TEST(VocabParallelLoss, EqualsCrossEntropyOverTheWholeVocabulary) {
  torch::manual_seed(5);
  const auto logits = torch::randn({7, 12}) * 3;
  auto targets = torch::randint(0, 12, {7}, torch::kLong);
  targets[2] = -1;  // ignored: no loss, no gradient
  auto whole = logits.clone().requires_grad_(true);
  const auto want = at::cross_entropy_loss(whole, targets, {}, at::Reduction::Mean, -1);
  want.backward();
  std::vector<std::vector<at::Tensor>> got(kRanks);
  const auto errors = testing::run_ranks_in_process(kRanks, [&](int r, dist::Group& g) {
    auto shard = shard_of(logits, 1, r, kRanks).clone().requires_grad_(true);
    const auto loss = vocab_parallel_cross_entropy(shard, targets, g);
    loss.backward();
    got[r] = {loss.detach(), shard.grad()};
  });
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    expect_close(got[r][0], want.detach(), "loss");
    expect_close(got[r][1], shard_of(whole.grad(), 1, r, kRanks), "logit grad");
  }
  EXPECT_TRUE(torch::equal(got[0][1].select(0, 2), torch::zeros({6}))) << "an ignored row";
}

}  // namespace
}  // namespace lmtrain::train
