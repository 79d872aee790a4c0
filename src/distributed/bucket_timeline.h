// When each gradient bucket of one step became ready, went out and came back, against the end of
// backward: the picture that says which bucket's communication backward did not hide.
// GradSync records one per armed step under TORCH_DISTRIBUTED_DEBUG=DETAIL and logs it as a
// table (times in ms since arm(), i.e. since the last micro-step's backward began).
// done() runs on the backend's completion thread, so every time is an atomic.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "distributed/bucket_plan.h"

namespace lmtrain::dist {

class BucketTimeline {
 public:
  explicit BucketTimeline(size_t buckets);

  void start();  // arm(): time zero, every mark cleared
  void ready(size_t bucket) { mark(ready_[bucket]); }
  void launched(size_t bucket) { mark(launched_[bucket]); }
  // The first of the completion callback and the wait's return wins.
  void done(size_t bucket);
  void backward_end();
  // When backward ended on the steady clock (ns since its epoch: CLOCK_MONOTONIC on Linux, one
  // clock for every process of a machine), for comparing ranks; 0 before backward_end().
  int64_t backward_end_clock_ns() const { return backward_end_clock_ns_; }

  // One line per bucket: size, parameters, ready / launched / done, and the part of its
  // transfer that ran after backward ended; then the step's unhidden total.
  std::string table(const std::vector<GradBucket>& buckets, int64_t element_size) const;
  // The ranks' backward ends (from backward_end_clock_ns() of every rank of one machine) against
  // the last one: the part of this rank's wait that was the slower ranks still computing, not
  // the transfers.
  static std::string skew_line(const std::vector<int64_t>& ends_ns, int rank);

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr double kUnset = -1.0;
  void mark(std::atomic<double>& slot) const;

  Clock::time_point zero_;
  std::unique_ptr<std::atomic<double>[]> ready_, launched_, done_;
  size_t size_;
  std::atomic<double> backward_end_{kUnset};
  int64_t backward_end_clock_ns_ = 0;
};

}  // namespace lmtrain::dist
