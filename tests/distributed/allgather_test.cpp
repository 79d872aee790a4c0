// Group::allgather over a real Gloo group whose ranks are threads of this process. On Gloo it
// runs as one broadcast per rank (distributed/c10d_group.cpp): every rank's piece must land in
// outputs[r] on every rank, whatever the outputs' shapes and strides.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "distributed/group.h"
#include "e2e/dist_harness.h"

namespace lmtrain::dist {
namespace {

using testing::run_ranks_in_process;

// Rank r's (2, 3) piece: 100 r + 0..5.
at::Tensor piece_of(int r) { return torch::arange(6, torch::kFloat).view({2, 3}) + 100.0 * r; }

TEST(Allgather, EveryRanksPieceLandsInItsOutputOnEveryRank) {
  const int world = 3;
  std::vector<std::vector<at::Tensor>> got(world);
  auto errors = run_ranks_in_process(world, [&](int r, Group& g) {
    // Outputs of other layouts: a flat tensor, a (2, 3) view of a wider buffer (not
    // contiguous), and a plain (2, 3) one.
    auto wide = torch::full({2, 5}, -1.0f);
    std::vector<at::Tensor> outputs{torch::empty({6}), wide.narrow(1, 1, 3), torch::empty({2, 3})};
    // Twice: the second call's broadcasts must not meet the first's.
    for (int round = 0; round < 2; ++round) {
      g.allgather(outputs, piece_of(r) + round)->wait();
    }
    got[r] = {outputs[0].view({2, 3}).clone(), outputs[1].clone(), outputs[2].clone(), wide};
  });
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    for (int q = 0; q < world; ++q) {
      EXPECT_TRUE(torch::equal(got[r][q], piece_of(q) + 1)) << "rank " << r << ", piece " << q;
    }
    // The view's columns outside it are untouched.
    EXPECT_TRUE(torch::equal(got[r][3].narrow(1, 0, 1), torch::full({2, 1}, -1.0f)));
    EXPECT_TRUE(torch::equal(got[r][3].narrow(1, 4, 1), torch::full({2, 1}, -1.0f)));
  }
}

TEST(Allgather, OutputsOfAnotherSizeAreRefusedNamingTheInput) {
  auto errors = run_ranks_in_process(2, [&](int, Group& g) {
    std::vector<at::Tensor> outputs{torch::empty({5}), torch::empty({5})};
    g.allgather(outputs, torch::ones({6}));
  });
  for (const auto& e : errors) {
    EXPECT_NE(e.find("allgather: outputs must match the input's 6 Float elements"),
              std::string::npos)
        << e;
  }
}

}  // namespace
}  // namespace lmtrain::dist
