// The per-bucket timeline of TORCH_DISTRIBUTED_DEBUG=DETAIL: marks in order, the first
// completion wins, and only what finished after backward counts as unhidden.
#include "distributed/bucket_timeline.h"

#include <gtest/gtest.h>

#include <sstream>
#include <thread>

#include "distributed/grad_sync.h"

namespace lmtrain::dist {
namespace {

// The numbers of `line`'s columns after the bucket index: MiB, params, ready, launched, done,
// after backward ("-" read as -1).
std::vector<double> columns(const std::string& line) {
  std::istringstream in(line);
  std::vector<double> out;
  std::string word;
  in >> word;  // bucket index
  while (in >> word) out.push_back(word == "-" ? -1.0 : std::stod(word));
  return out;
}

TEST(BucketTimeline, MarksEachBucketAndCountsOnlyWhatEndsAfterBackward) {
  const std::vector<GradBucket> buckets = {{0, 262144, {0, 1}}, {262144, 524288, {2}}};
  BucketTimeline t(buckets.size());
  const auto pause = [] { std::this_thread::sleep_for(std::chrono::milliseconds(2)); };
  t.start();
  t.ready(0);
  t.launched(0);
  pause();
  t.done(0);  // completes during backward: hidden
  pause();
  t.ready(1);
  t.launched(1);
  pause();
  t.backward_end();
  pause();
  t.done(1);  // the wait's return after the callback: the callback's time stays
  pause();
  t.done(1);

  const std::string table = t.table(buckets, 4);
  std::istringstream lines(table);
  std::string header, names, row0, row1, total;
  std::getline(lines, header);
  std::getline(lines, names);
  std::getline(lines, row0);
  std::getline(lines, row1);
  std::getline(lines, total);
  ASSERT_NE(header.find("bucket timeline"), std::string::npos) << table;
  const auto b0 = columns(row0), b1 = columns(row1);
  ASSERT_EQ(b0.size(), 6u) << table;
  ASSERT_EQ(b1.size(), 6u) << table;
  EXPECT_DOUBLE_EQ(b0[0], 1.0);  // 262144 fp32 elements = 1 MiB
  EXPECT_DOUBLE_EQ(b0[1], 2.0);
  EXPECT_LE(b0[2], b0[3]);  // ready <= launched <= done
  EXPECT_LE(b0[3], b0[4]);
  EXPECT_DOUBLE_EQ(b0[5], 0.0);  // done before backward ended
  EXPECT_LT(b0[4], b1[2]);
  EXPECT_GT(b1[5], 0.0);  // done after backward ended
  // The unhidden total is the last completion's distance from the end of backward.
  const double unhidden = std::stod(total.substr(total.find(':') + 1));
  EXPECT_NEAR(unhidden, b1[5], 0.11);
  // A new step starts from nothing.
  t.start();
  EXPECT_NE(t.table(buckets, 4).find("backward ended at -"), std::string::npos);
}

TEST(BucketTimeline, SkewLineSaysHowLongThisRankWaitedForTheLastBackward) {
  // Rank 1 ended first, rank 2 last: rank 1 waited 12.5 ms for it, rank 2 none.
  const std::vector<int64_t> ends = {1'004'000'000, 1'000'000'000, 1'012'500'000};
  EXPECT_EQ(BucketTimeline::skew_line(ends, 1),
            "  ranks' backward ends (ms after the first): 4.0, 0.0, 12.5; this rank waited 12.5 "
            "ms for the last");
  EXPECT_NE(BucketTimeline::skew_line(ends, 2).find("waited 0.0 ms"), std::string::npos);
  BucketTimeline t(1);
  t.start();
  EXPECT_EQ(t.backward_end_clock_ns(), 0);
  t.backward_end();
  EXPECT_GT(t.backward_end_clock_ns(), 0);
}

}  // namespace
}  // namespace lmtrain::dist
