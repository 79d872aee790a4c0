#include "data/distributed_sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>

#include "core/error.h"
#include "test_util.h"

namespace lmtrain::data {
namespace {

// All ranks' indices for one epoch, rank-major.
std::vector<std::vector<int64_t>> all_ranks(int64_t size, int64_t world, bool shuffle,
                                            uint64_t seed, bool drop_last, int64_t epoch) {
  std::vector<std::vector<int64_t>> out;
  for (int64_t r = 0; r < world; ++r) {
    DistributedSampler s(size, world, r, shuffle, seed, drop_last);
    s.set_epoch(epoch);
    out.push_back(s.indices());
  }
  return out;
}

std::map<int64_t, int> count_indices(const std::vector<std::vector<int64_t>>& per_rank) {
  std::map<int64_t, int> counts;
  for (const auto& v : per_rank) {
    for (int64_t i : v) ++counts[i];
  }
  return counts;
}

TEST(DistributedSampler, DivisibleSizeVisitsEveryIndexExactlyOnce) {
  for (bool shuffle : {true, false}) {
    for (bool drop_last : {true, false}) {
      const auto per_rank = all_ranks(12, 4, shuffle, 3, drop_last, 0);
      for (const auto& v : per_rank) EXPECT_EQ(v.size(), 3u);
      const auto counts = count_indices(per_rank);
      ASSERT_EQ(counts.size(), 12u);
      for (const auto& [index, n] : counts) {
        EXPECT_GE(index, 0);
        EXPECT_LT(index, 12);
        EXPECT_EQ(n, 1) << "index " << index;
      }
    }
  }
}

TEST(DistributedSampler, PaddingVisitsEveryIndexAtLeastOnce) {
  // 10 over 3 ranks: 4 each, total 12, so exactly two indices are visited twice.
  DistributedSampler s(10, 3, 0);
  EXPECT_EQ(s.num_samples(), 4);
  EXPECT_EQ(s.total_size(), 12);
  const auto per_rank = all_ranks(10, 3, true, 0, false, 0);
  int64_t total = 0;
  for (const auto& v : per_rank) {
    EXPECT_EQ(static_cast<int64_t>(v.size()), s.num_samples());
    total += static_cast<int64_t>(v.size());
  }
  EXPECT_EQ(total, s.total_size());
  const auto counts = count_indices(per_rank);
  ASSERT_EQ(counts.size(), 10u);
  int twice = 0;
  for (const auto& [index, n] : counts) {
    EXPECT_GE(n, 1) << "index " << index;
    EXPECT_LE(n, 2) << "index " << index;
    twice += n == 2;
  }
  EXPECT_EQ(twice, 2);
}

TEST(DistributedSampler, PaddingRepeatsWholeListWhenWorldExceedsSize) {
  // 2 items, 5 ranks, no shuffle: the list [0, 1] is repeated to [0, 1, 0, 1, 0].
  const auto per_rank = all_ranks(2, 5, false, 0, false, 0);
  const std::vector<std::vector<int64_t>> expected = {{0}, {1}, {0}, {1}, {0}};
  EXPECT_EQ(per_rank, expected);
}

TEST(DistributedSampler, DropLastDropsTheTail) {
  // 10 over 3 ranks: 3 each; the last element of the (shuffled or not) order is never visited.
  DistributedSampler s(10, 3, 1, /*shuffle=*/false, 0, /*drop_last=*/true);
  EXPECT_EQ(s.num_samples(), 3);
  EXPECT_EQ(s.total_size(), 9);
  EXPECT_EQ(s.indices(), (std::vector<int64_t>{1, 4, 7}));
  const auto counts = count_indices(all_ranks(10, 3, true, 9, true, 2));
  EXPECT_EQ(counts.size(), 9u);
  for (const auto& [index, n] : counts) EXPECT_EQ(n, 1) << "index " << index;

  // Fewer items than ranks: nobody gets anything (PyTorch's ceil((2 - 5) / 5) == 0).
  DistributedSampler tiny(2, 5, 4, true, 0, true);
  EXPECT_EQ(tiny.num_samples(), 0);
  EXPECT_TRUE(tiny.indices().empty());
}

TEST(DistributedSampler, EmptyDatasetGivesNoIndices) {
  DistributedSampler s(0, 2, 1);
  EXPECT_EQ(s.num_samples(), 0);
  EXPECT_EQ(s.total_size(), 0);
  EXPECT_TRUE(s.indices().empty());
}

TEST(DistributedSampler, OrderDependsOnEpochAndSeedOnly) {
  DistributedSampler a(100, 2, 0, true, 5);
  DistributedSampler b(100, 2, 0, true, 5);
  EXPECT_EQ(a.indices(), b.indices());
  const auto epoch0 = a.indices();
  EXPECT_EQ(a.indices(), epoch0) << "indices() must be repeatable within an epoch";
  a.set_epoch(1);
  EXPECT_EQ(a.epoch(), 1);
  EXPECT_NE(a.indices(), epoch0);
  b.set_epoch(1);
  EXPECT_EQ(a.indices(), b.indices());
  a.set_epoch(0);
  EXPECT_EQ(a.indices(), epoch0);
  EXPECT_NE(DistributedSampler(100, 2, 0, true, 6).indices(), epoch0);

  // Without shuffle the epoch changes nothing.
  DistributedSampler plain(10, 2, 1, false);
  const auto plain0 = plain.indices();
  plain.set_epoch(7);
  EXPECT_EQ(plain.indices(), plain0);
  EXPECT_EQ(plain0, (std::vector<int64_t>{1, 3, 5, 7, 9}));
}

// Indices produced by PyTorch's own torch.utils.data.DistributedSampler (1.13), written by
// tests/fixtures/make_sampler_fixture.py. Shuffled cases also pin torch.randperm parity
// between Python's torch.Generator and at::CPUGeneratorImpl.
TEST(DistributedSampler, MatchesPyTorchFixture) {
  const auto fixture = nlohmann::json::parse(lmtrain::testing::read_text(
      lmtrain::testing::source_dir() + "/tests/fixtures/distributed_sampler.json"));
  const auto& cases = fixture.at("cases");
  ASSERT_GE(cases.size(), 10u);
  for (const auto& c : cases) {
    const std::string name = c.at("name").get<std::string>();
    const auto world = c.at("num_replicas").get<int64_t>();
    const auto& expected = c.at("indices");
    ASSERT_EQ(static_cast<int64_t>(expected.size()), world) << name;
    for (int64_t r = 0; r < world; ++r) {
      DistributedSampler s(c.at("size").get<int64_t>(), world, r, c.at("shuffle").get<bool>(),
                           c.at("seed").get<uint64_t>(), c.at("drop_last").get<bool>());
      s.set_epoch(c.at("epoch").get<int64_t>());
      EXPECT_EQ(s.num_samples(), c.at("num_samples").get<int64_t>()) << name;
      EXPECT_EQ(s.total_size(), c.at("total_size").get<int64_t>()) << name;
      EXPECT_EQ(s.indices(), expected.at(r).get<std::vector<int64_t>>()) << name << " rank " << r;
    }
  }
}

// Runs f, expects a UsageError whose message contains every string in `needles`.
template <typename F>
void expect_usage_error(F f, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "expected a UsageError";
  } catch (const UsageError& e) {
    for (const auto& needle : needles) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
          << "message '" << e.what() << "' lacks '" << needle << "'";
    }
  }
}

TEST(DistributedSampler, BadArgumentsNameTheBadValue) {
  expect_usage_error([] { DistributedSampler(10, 2, 2); }, {"rank 2", "[0, 1]"});
  expect_usage_error([] { DistributedSampler(10, 4, 7); }, {"rank 7", "[0, 3]"});
  expect_usage_error([] { DistributedSampler(10, 2, -1); }, {"rank -1"});
  expect_usage_error([] { DistributedSampler(10, 0, 0); }, {"num_replicas 0"});
  expect_usage_error([] { DistributedSampler(10, -3, 0); }, {"num_replicas -3"});
  expect_usage_error([] { DistributedSampler(-5, 2, 0); }, {"size -5"});
}

}  // namespace
}  // namespace lmtrain::data
