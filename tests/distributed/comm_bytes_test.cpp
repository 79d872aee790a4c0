// The bytes each collective counts (distributed/comm_bytes.h), over a real 2-rank Gloo group
// whose ranks are threads of this process: the counters are process-wide, so every expected
// figure is the sum of both ranks' shares.
#include "distributed/comm_bytes.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "distributed/process_group.h"
#include "e2e/dist_harness.h"

namespace lmtrain::dist {
namespace {

using testing::run_ranks_in_process;

TEST(CommBytes, EachCollectiveCountsItsRingTraffic) {
  CommBytes before, after;
  auto errors = run_ranks_in_process(2, [&](int r, Group& g) {
    g.barrier();
    if (r == 0) before = comm_bytes_so_far();
    g.barrier();
    auto t = torch::ones({1000});  // 4000 bytes: 2 (W-1)/W = 1x of it per rank
    g.allreduce(t, ReduceOp::kSum)->wait();
    std::vector<at::Tensor> gathered{torch::empty({100}), torch::empty({100})};
    g.allgather(gathered, torch::ones({100}))->wait();  // 400 bytes in: (W-1) x per rank
    auto shard = torch::empty({50});
    std::vector<at::Tensor> parts{torch::ones({50}), torch::ones({50})};  // 400 bytes in all
    g.reduce_scatter(shard, parts, ReduceOp::kSum)->wait();  // (W-1)/W of them per rank
    auto rows = torch::ones({4, 3});  // 48 bytes, half kept: 24 sent per rank
    auto got = torch::empty({4, 3});
    g.all_to_all(got, rows, {}, {})->wait();
    auto b = torch::ones({10});  // 40 bytes: (W-1)/W per rank
    g.broadcast(b, 0)->wait();
    g.barrier();
    if (r == 0) after = comm_bytes_so_far();
  });
  ASSERT_EQ(errors[0], "");
  ASSERT_EQ(errors[1], "");
  const auto d = after - before;
  EXPECT_EQ(d.all_reduce, 2 * 4000);
  EXPECT_EQ(d.all_gather, 2 * 400);
  EXPECT_EQ(d.reduce_scatter, 2 * 200);  // Gloo's runs on an all-to-all: not counted twice
  EXPECT_EQ(d.all_to_all, 2 * 24);
  EXPECT_EQ(d.broadcast, 2 * 20);
  EXPECT_EQ(d.total(), 8000 + 800 + 400 + 48 + 40);
  EXPECT_EQ(d.divided_by(4).all_reduce, 2000);
  EXPECT_EQ(d.describe(),
            "0.0 MB (all-reduce 0.0, all-gather 0.0, reduce-scatter 0.0, broadcast 0.0, "
            "all-to-all 0.0)");
}

TEST(CommBytes, AWorldOfOneSendsNothing) {
  auto single = make_single_rank_group();
  const auto before = comm_bytes_so_far();
  auto t = torch::ones({1000});
  single->allreduce(t, ReduceOp::kSum)->wait();
  EXPECT_EQ((comm_bytes_so_far() - before).total(), 0);
  CommBytes m;
  m.all_reduce = 12'600'000;
  m.all_gather = 3'100'000;
  EXPECT_EQ(m.describe(), "15.7 MB (all-reduce 12.6, all-gather 3.1)");
}

}  // namespace
}  // namespace lmtrain::dist
