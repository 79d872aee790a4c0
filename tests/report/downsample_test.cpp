// Downsampling for drawing (report/downsample.h): few points stay as they are, many become at
// most 4 per bucket, and the extremes (a loss spike, a throughput dip) are always drawn.
#include "report/downsample.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace lmtrain::report {
namespace {

TEST(Downsample, ShortSeriesAreDrawnWhole) {
  std::vector<double> v(4 * 10, 1.0);
  const auto keep = downsample_indices(v, 10);
  ASSERT_EQ(keep.size(), v.size());
  for (size_t i = 0; i < keep.size(); ++i) EXPECT_EQ(keep[i], i);
}

TEST(Downsample, LongSeriesKeepFirstMinMaxLastOfEachBucket) {
  // 1000 points, 10 buckets of 100: each bucket's first, min, max, last.
  std::vector<double> v(1000);
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(0, 1);
  for (auto& x : v) x = u(rng);
  v[517] = 9.0;   // a spike
  v[733] = -4.0;  // a dip
  const auto keep = downsample_indices(v, 10);
  EXPECT_LE(keep.size(), 40u);
  EXPECT_TRUE(std::is_sorted(keep.begin(), keep.end()));
  EXPECT_EQ(std::adjacent_find(keep.begin(), keep.end()), keep.end()) << "an index twice";
  EXPECT_EQ(keep.front(), 0u);
  EXPECT_EQ(keep.back(), 999u);
  EXPECT_NE(std::find(keep.begin(), keep.end(), 517u), keep.end());
  EXPECT_NE(std::find(keep.begin(), keep.end(), 733u), keep.end());
  // Each bucket: exactly its first, argmin, argmax and last (first index on ties).
  for (size_t b = 0; b < 10; ++b) {
    const size_t begin = b * 100, end = begin + 100;
    const size_t lo =
        static_cast<size_t>(std::min_element(v.begin() + begin, v.begin() + end) - v.begin());
    const size_t hi =
        static_cast<size_t>(std::max_element(v.begin() + begin, v.begin() + end) - v.begin());
    std::vector<size_t> expected{begin, std::min(lo, hi), std::max(lo, hi), end - 1};
    std::vector<size_t> got;
    for (size_t i : keep) {
      if (i >= begin && i < end) got.push_back(i);
    }
    EXPECT_EQ(got, expected) << "bucket " << b;
  }
}

TEST(Downsample, AMillionPointsBecomeAtMostFourPerBucket) {
  std::vector<double> v(1000000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(static_cast<double>(i) * 1e-3);
  v[123457] = 50;
  const auto keep = downsample_indices(v);
  EXPECT_LE(keep.size(), 4 * kMaxBuckets);
  EXPECT_GE(keep.size(), 2 * kMaxBuckets);
  EXPECT_NE(std::find(keep.begin(), keep.end(), 123457u), keep.end());
}

TEST(Downsample, EmaIsBiasCorrectedAndSmooths) {
  const std::vector<double> v{4, 4, 4, 10, 4, 4};
  const auto s = ema_smooth(v, 0.9);
  EXPECT_DOUBLE_EQ(s[0], 4.0) << "no pull towards 0 at the start";
  EXPECT_NEAR(s[2], 4.0, 1e-12);
  EXPECT_GT(s[3], 4.0);
  EXPECT_LT(s[3], 10.0);
  EXPECT_DOUBLE_EQ(smoothing_beta(100), 0.9);
  EXPECT_DOUBLE_EQ(smoothing_beta(1000000), 1 - 200.0 / 1e6);
}

}  // namespace
}  // namespace lmtrain::report
