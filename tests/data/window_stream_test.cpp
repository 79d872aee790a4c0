#include "data/window_stream.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

namespace lmtrain::data {
namespace {

// The epoch order is part of every checkpoint's meaning (a saved data position indexes into
// it), so it must never change between versions. Expected values come from an independent
// Python implementation of the documented algorithm (splitmix64-driven Fisher-Yates).
TEST(WindowStream, SeededPermutationIsStableAcrossVersions) {
  EXPECT_EQ(seeded_permutation(12, 1337, 0),
            (std::vector<int64_t>{8, 6, 1, 5, 2, 3, 10, 0, 9, 7, 11, 4}));
  EXPECT_EQ(seeded_permutation(12, 1337, 1),
            (std::vector<int64_t>{1, 9, 3, 10, 6, 2, 11, 5, 0, 8, 7, 4}));
}

TEST(WindowStream, SeededPermutationIsAPermutation) {
  auto p = seeded_permutation(1000, 7, 3);
  std::sort(p.begin(), p.end());
  std::vector<int64_t> expected(1000);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(p, expected);
  EXPECT_NE(seeded_permutation(1000, 7, 3), seeded_permutation(1000, 7, 4));
}

}  // namespace
}  // namespace lmtrain::data
