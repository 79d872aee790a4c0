// Gradient bucketing: the bucket plan, and bucket all-reduces launched from gradient hooks
// during backward over a real two-rank Gloo group (two threads of this process, real TCP).
#include "distributed/grad_sync.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/error.h"
#include "distributed/process_group.h"
#include "e2e/dist_harness.h"
#include "model/gpt.h"
#include "model_fixtures.h"
#include "optim/flat_params.h"

namespace lmtrain::dist {
namespace {

TEST(PlanBuckets, CutsAtParameterBoundariesFromTheEndOnceABucketIsFull) {
  // Four parameters of 10, 10, 30, 5 elements (4 bytes each), aligned to 16 elements.
  const std::vector<std::pair<int64_t, int64_t>> ranges = {{0, 10}, {16, 10}, {32, 30}, {64, 5}};
  const auto b = plan_buckets(ranges, 80, 4, 100, 100);  // >= 25 elements per bucket
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].begin, 0);
  EXPECT_EQ(b[0].end, 32);  // what is left at the front
  EXPECT_EQ(b[0].params, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(b[1].begin, 32);  // params 3 (with the tail padding) and 2 reach 100 bytes
  EXPECT_EQ(b[1].end, 80);
  EXPECT_EQ(b[1].params, (std::vector<size_t>{2, 3}));
}

TEST(PlanBuckets, TheLastBucketsGrowFromTheTailSizeToTheBucketSize) {
  // 8 parameters of 16 elements (64 bytes each): from the end, buckets of at least 64, 128,
  // 256 bytes, then the 256-byte cap; the front keeps the remainder.
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int64_t i = 0; i < 8; ++i) ranges.emplace_back(16 * i, 16);
  const auto b = plan_buckets(ranges, 128, 4, 256, 64);
  ASSERT_EQ(b.size(), 4u);
  EXPECT_EQ(b[3].params, (std::vector<size_t>{7}));
  EXPECT_EQ(b[2].params, (std::vector<size_t>{5, 6}));
  EXPECT_EQ(b[1].params, (std::vector<size_t>{1, 2, 3, 4}));
  EXPECT_EQ(b[0].params, (std::vector<size_t>{0}));
  for (size_t i = 0; i + 1 < b.size(); ++i) EXPECT_EQ(b[i].end, b[i + 1].begin);
  EXPECT_EQ(b.front().begin, 0);
  EXPECT_EQ(b.back().end, 128);
}

TEST(PlanBuckets, ABigBucketSizeGivesOneBucketAndATinyOneGivesOnePerParameter) {
  const std::vector<std::pair<int64_t, int64_t>> ranges = {{0, 10}, {16, 10}, {32, 30}};
  EXPECT_EQ(plan_buckets(ranges, 64, 4, 1 << 30, 1 << 30).size(), 1u);
  const auto per_param = plan_buckets(ranges, 64, 4, 1, 1);
  ASSERT_EQ(per_param.size(), 3u);
  EXPECT_EQ(per_param[2].end, 64);  // the tail padding belongs to the last bucket
}

TEST(PlanBuckets, IsolatingAParameterSplitsOnlyItsBucket) {
  const std::vector<std::pair<int64_t, int64_t>> ranges = {{0, 10}, {16, 10}, {32, 30}, {64, 5}};
  auto b = plan_buckets(ranges, 80, 4, 100, 100);  // {0, 1} [0, 32), {2, 3} [32, 80)
  isolate_param(b, ranges, 2);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[1].params, std::vector<size_t>{2});
  EXPECT_EQ(b[1].begin, 32);
  EXPECT_EQ(b[1].end, 64);
  EXPECT_EQ(b[2].params, std::vector<size_t>{3});
  EXPECT_EQ(b[2].begin, 64);
  EXPECT_EQ(b[2].end, 80);
  isolate_param(b, ranges, 0);  // the first: the leading padding stays with it
  ASSERT_EQ(b.size(), 4u);
  EXPECT_EQ(b[0].params, std::vector<size_t>{0});
  EXPECT_EQ(b[0].begin, 0);
  EXPECT_EQ(b[0].end, 16);
  EXPECT_EQ(b[1].begin, 16);
  for (size_t i = 0; i + 1 < b.size(); ++i) EXPECT_EQ(b[i].end, b[i + 1].begin);
  EXPECT_THROW(isolate_param(b, ranges, 7), Error);
}

TEST(PlanBuckets, RejectsUnorderedRanges) {
  EXPECT_THROW(plan_buckets({{16, 10}, {0, 10}}, 32, 4, 8), Error);
}

enum class Mode { kAllReduce, kReduceScatter, kOwners };

// Owner mode in the test: every third parameter is owned by rank (i/3)%2, the rest shared.
int test_owner(size_t i) { return i % 3 == 0 ? static_cast<int>((i / 3) % 2) : -1; }

// Each rank trains the same tiny GPT on different rows; after backward + finish() the flat
// gradient must equal the mean of the two ranks' single-process gradients where this rank
// needs it, and every bucket must already have been launched by the hooks when backward
// returned. With `rebind`, the hooks are remade (rebind_to_current_stream, as a CUDA graph step
// does) before the backward: refused while a forward's graph holds the accumulators, then done.
class GradSyncModes : public ::testing::TestWithParam<std::tuple<Mode, bool>> {};

TEST_P(GradSyncModes, HooksLaunchEveryBucketDuringBackwardAndAverageAcrossRanks) {
  const auto [mode, rebind] = GetParam();
  const auto cfg = model::tiny_gpt_config(32, 64, 16);
  torch::manual_seed(0);
  auto data = torch::randint(64, {2, 4, 17}, torch::kLong);  // rank, rows, T+1

  // Models are built up front: the global RNG must not be shared by two threads.
  struct Replica {
    model::Gpt model;
    std::unique_ptr<optim::FlatParams> flat;
  };
  auto make_replica = [&] {
    torch::manual_seed(1);
    Replica r{model::Gpt(cfg), nullptr};
    r.flat = std::make_unique<optim::FlatParams>(
        *r.model, [&](const std::string& n) { return r.model->decays(n); }, /*pad=*/32);
    return r;
  };
  std::vector<Replica> replicas;
  for (int i = 0; i < 4; ++i) replicas.push_back(make_replica());

  auto grads_of = [&](int rank, Group* group, size_t* launched, size_t* buckets) {
    auto& rep = replicas[rank + (group ? 2 : 0)];
    auto& m = rep.model;
    auto& flat = *rep.flat;
    auto rows = data[rank];
    auto x = rows.narrow(1, 0, 16), y = rows.narrow(1, 1, 16);
    std::unique_ptr<GradSync> sync;
    if (group) {
      auto named = m->named_parameters();
      std::vector<at::Tensor> params;
      std::vector<std::pair<int64_t, int64_t>> ranges;
      for (const auto& s : flat.segments()) {
        params.push_back(named[s.name]);
        ranges.emplace_back(s.offset, s.numel);
      }
      std::vector<int> owners;
      if (mode == Mode::kOwners) {
        for (size_t i = 0; i < params.size(); ++i) owners.push_back(test_owner(i));
      }
      sync = std::make_unique<GradSync>(*group, params, ranges, flat.grads(), 4096,
                                        mode == Mode::kReduceScatter, owners);
      if (rebind) {
        {
          auto live = m->loss(x, y);  // its graph holds every accumulator
          EXPECT_THROW(sync->rebind_to_current_stream(), Error);
        }
        sync->rebind_to_current_stream();
      }
      sync->arm();
    }
    m->loss(x, y).backward();
    if (sync) {
      *launched = sync->launched();
      *buckets = sync->buckets().size();
      sync->finish();
    }
    return flat.grads().clone();
  };

  const auto g0 = grads_of(0, nullptr, nullptr, nullptr);
  const auto g1 = grads_of(1, nullptr, nullptr, nullptr);
  const auto expected = (g0 + g1) / 2;

  std::vector<at::Tensor> got(2);
  std::vector<size_t> launched(2), buckets(2);
  const auto errors = testing::run_ranks_in_process(
      2, [&](int r, Group& group) { got[r] = grads_of(r, &group, &launched[r], &buckets[r]); });
  const auto& segs = replicas[0].flat->segments();
  const int64_t shard = expected.numel() / 2;
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    EXPECT_GT(buckets[r], 3u) << "the test wants several buckets";
    EXPECT_EQ(launched[r], buckets[r]) << "rank " << r << ": buckets not launched in backward";
    const auto& local = r == 0 ? g0 : g1;
    switch (mode) {
      case Mode::kAllReduce:
        EXPECT_TRUE(torch::allclose(got[r], expected, 1e-6, 1e-7)) << "rank " << r;
        break;
      case Mode::kReduceScatter:
        EXPECT_TRUE(torch::allclose(got[r].narrow(0, r * shard, shard),
                                    expected.narrow(0, r * shard, shard), 1e-6, 1e-7))
            << "rank " << r;
        break;
      case Mode::kOwners:
        for (size_t i = 0; i < segs.size(); ++i) {
          const auto g = got[r].narrow(0, segs[i].offset, segs[i].numel);
          const int owner = test_owner(i);
          // Needed here: averaged. Owned by the other rank: never received, still local.
          const auto want =
              (owner < 0 || owner == r ? expected : local).narrow(0, segs[i].offset, segs[i].numel);
          EXPECT_TRUE(torch::allclose(g, want, 1e-6, 1e-7)) << "rank " << r << " " << segs[i].name;
        }
        break;
    }
  }
}

std::string mode_test_name(const ::testing::TestParamInfo<std::tuple<Mode, bool>>& info) {
  static const char* const kNames[] = {"AllReduce", "ReduceScatter", "Owners"};
  return std::string(kNames[static_cast<int>(std::get<0>(info.param))]) +
         (std::get<1>(info.param) ? "Rebound" : "");
}

INSTANTIATE_TEST_SUITE_P(GradSync, GradSyncModes,
                         ::testing::Combine(::testing::Values(Mode::kAllReduce,
                                                              Mode::kReduceScatter, Mode::kOwners),
                                            ::testing::Bool()),
                         mode_test_name);

}  // namespace
}  // namespace lmtrain::dist
