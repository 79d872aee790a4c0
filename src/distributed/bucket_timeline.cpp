#include "distributed/bucket_timeline.h"

#include <algorithm>

#include "core/log.h"

namespace lmtrain::dist {
namespace {

std::unique_ptr<std::atomic<double>[]> unset_slots(size_t n) {
  auto slots = std::make_unique<std::atomic<double>[]>(n);
  for (size_t i = 0; i < n; ++i) slots[i] = -1.0;
  return slots;
}

std::string format_ms(double t) {
  return t < 0 ? "-" : log::format("%.1f", t);
}

}  // namespace

BucketTimeline::BucketTimeline(size_t buckets)
    : ready_(unset_slots(buckets)),
      launched_(unset_slots(buckets)),
      done_(unset_slots(buckets)),
      size_(buckets) {}

void BucketTimeline::start() {
  zero_ = Clock::now();
  for (size_t i = 0; i < size_; ++i) ready_[i] = launched_[i] = done_[i] = kUnset;
  backward_end_ = kUnset;
  backward_end_clock_ns_ = 0;
}

void BucketTimeline::mark(std::atomic<double>& slot) const {
  slot = std::chrono::duration<double, std::milli>(Clock::now() - zero_).count();
}

void BucketTimeline::done(size_t bucket) {
  double expected = kUnset;
  const double now = std::chrono::duration<double, std::milli>(Clock::now() - zero_).count();
  done_[bucket].compare_exchange_strong(expected, now);
}

void BucketTimeline::backward_end() {
  mark(backward_end_);
  backward_end_clock_ns_ =
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

std::string BucketTimeline::skew_line(const std::vector<int64_t>& ends_ns, int rank) {
  if (ends_ns.empty()) return {};
  const int64_t first = *std::min_element(ends_ns.begin(), ends_ns.end());
  const int64_t last = *std::max_element(ends_ns.begin(), ends_ns.end());
  std::string ends;
  for (const auto e : ends_ns)
    ends += log::format("%s%.1f", ends.empty() ? "" : ", ", (e - first) / 1e6);
  return log::format(
      "  ranks' backward ends (ms after the first): %s; this rank waited %.1f ms for the last",
      ends.c_str(), (last - ends_ns[static_cast<size_t>(rank)]) / 1e6);
}

std::string BucketTimeline::table(const std::vector<GradBucket>& buckets,
                                  int64_t element_size) const {
  const double end = backward_end_;
  std::string out = log::format(
      "bucket timeline (ms since backward began; backward ended at %s):\n"
      "  bucket      MiB  params    ready  launched     done  after backward\n",
      format_ms(end).c_str());
  double unhidden = 0, last_done = end;
  for (size_t b = 0; b < size_ && b < buckets.size(); ++b) {
    const double mib = (buckets[b].end - buckets[b].begin) * element_size / 1048576.0;
    const double after = done_[b] < 0 || end < 0 ? 0 : std::max(0.0, done_[b] - end);
    last_done = std::max<double>(last_done, done_[b]);
    out += log::format("  %6zu %8.2f %7zu %8s %9s %8s %15s\n", b, mib, buckets[b].params.size(),
                       format_ms(ready_[b]).c_str(), format_ms(launched_[b]).c_str(),
                       format_ms(done_[b]).c_str(), format_ms(after).c_str());
  }
  if (end >= 0) unhidden = std::max(0.0, last_done - end);
  out += log::format("  communication after backward: %.1f ms", unhidden);
  return out;
}

}  // namespace lmtrain::dist
