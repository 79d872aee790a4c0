// Sub-groups (Group::split) and the differentiable all-to-all over real Gloo process groups:
// 3-4 ranks as threads of this process, each with its own TCPStore client and Gloo group.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "distributed/all_to_all_autograd.h"
#include "distributed/process_group.h"
#include "e2e/dist_harness.h"

namespace lmtrain::dist {
namespace {

using testing::run_ranks_in_process;

TEST(Subgroup, SplitReducesWithinMembersOnly) {
  std::vector<double> got(4, -1), got_all(4, -1);
  std::vector<int> sub_rank(4, -1), sub_size(4, -1);
  auto errors = run_ranks_in_process(4, [&](int r, Group& g) {
    // Every rank takes part in both splits; members get a group, the others nullptr.
    auto a = g.split({0, 2});
    auto b = g.split({1, 3});
    auto& mine = (r % 2 == 0) ? a : b;
    auto& other = (r % 2 == 0) ? b : a;
    ASSERT_NE(mine, nullptr);
    ASSERT_EQ(other, nullptr);
    sub_rank[r] = mine->rank();
    sub_size[r] = mine->size();
    auto t = torch::tensor({static_cast<double>(r + 1)}, torch::kFloat64);
    mine->allreduce(t, ReduceOp::kSum)->wait();
    got[r] = t.item<double>();
    // The parent still works after (and alongside) its sub-groups.
    auto u = torch::tensor({static_cast<double>(r + 1)}, torch::kFloat64);
    g.allreduce(u, ReduceOp::kSum)->wait();
    got_all[r] = u.item<double>();
  });
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    EXPECT_EQ(sub_rank[r], r / 2);
    EXPECT_EQ(sub_size[r], 2);
    EXPECT_EQ(got[r], r % 2 == 0 ? 1.0 + 3.0 : 2.0 + 4.0) << "rank " << r;
    EXPECT_EQ(got_all[r], 10.0);
  }
}

TEST(Subgroup, SplitRejectsRanksOutsideOrUnordered) {
  auto single = make_single_rank_group();
  EXPECT_THROW(single->split({1}), std::exception);
  EXPECT_THROW(single->split({}), std::exception);
  EXPECT_NE(single->split({0}), nullptr);
  try {
    split_index({2, 1}, 0, 4);
    FAIL() << "unordered ranks accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("[2,1]"), std::string::npos) << e.what();
  }
}

// Rows rank r sends to rank s: uneven, with zeros, different on every rank.
int64_t rows_from_to(int r, int s) { return (r + 2 * s) % 3; }

TEST(AllToAllAutograd, UnevenSplitsRouteRowsAndGradientsBack) {
  const int world = 3, width = 4;
  std::vector<std::string> failures(world);
  auto errors = run_ranks_in_process(world, [&](int r, Group& g) {
    std::vector<int64_t> in_splits, out_splits;
    std::vector<at::Tensor> rows;
    for (int s = 0; s < world; ++s) {
      in_splits.push_back(rows_from_to(r, s));
      out_splits.push_back(rows_from_to(s, r));
      // Row i for rank s carries (100 r + 10 s + i) in every column: its origin is readable.
      for (int64_t i = 0; i < rows_from_to(r, s); ++i) {
        rows.push_back(torch::full({1, width}, 100.0 * r + 10.0 * s + i, torch::kFloat64));
      }
    }
    auto input = (rows.empty() ? torch::empty({0, width}, torch::kFloat64) : torch::cat(rows))
                     .requires_grad_(true);
    auto out = all_to_all_autograd(g, input, out_splits, in_splits);
    int64_t at = 0;
    for (int s = 0; s < world; ++s) {
      for (int64_t i = 0; i < rows_from_to(s, r); ++i, ++at) {
        const double want = 100.0 * s + 10.0 * r + i;
        if (out[at][0].item<double>() != want) {
          failures[r] += "row " + std::to_string(at) + " wrong; ";
        }
      }
    }
    if (at != out.size(0)) failures[r] += "row count wrong; ";
    // d(sum out^2)/d out = 2 out, sent back: every input row gets 2x itself.
    out.pow(2).sum().backward();
    if (!torch::equal(input.grad(), 2 * input.detach())) failures[r] += "gradient misrouted; ";
  });
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(errors[r], "") << "rank " << r;
    EXPECT_EQ(failures[r], "") << "rank " << r;
  }
}

}  // namespace
}  // namespace lmtrain::dist
