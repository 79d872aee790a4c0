// The end of a GradSync step (distributed/grad_sync.h): the buckets backward did not launch,
// the waits, each bucket's averaged result put back into the flat buffer (widened from
// reduce_dtype, unpacked from the owners' copies), the late rows' exchange, and the DETAIL
// timeline's log.
#include <algorithm>
#include <chrono>
#include <vector>

#include "core/log.h"
#include "distributed/grad_sync.h"

namespace lmtrain::dist {

void GradSync::complete(size_t i) {
  if (works_[i]) {
    works_[i]->wait();
    works_[i].reset();
    if (!owners_.empty()) unpack(i, group_.rank(), received_[i]);
    received_[i] = at::Tensor();
    if (lowered_[i].defined()) {
      const auto& b = buckets_[i];
      if (reduce_scatter_) {  // only this rank's part of the bucket came back averaged
        const int64_t lo = std::clamp(group_.rank() * shard_, b.begin, b.end);
        const int64_t hi = std::clamp((group_.rank() + 1) * shard_, b.begin, b.end);
        flat_grads_.narrow(0, lo, hi - lo).copy_(lowered_[i].narrow(0, lo - b.begin, hi - lo));
      } else {
        flat_grads_.narrow(0, b.begin, b.end - b.begin).copy_(lowered_[i]);
      }
      lowered_[i] = at::Tensor();
    }
  }
  if (shared_works_[i]) {
    shared_works_[i]->wait();
    shared_works_[i].reset();
    unpack(i, -1, shared_[i]);
  }
  shared_[i] = at::Tensor();
}

double GradSync::finish() {
  if (!active()) return 0;
  if (!armed_) next_launch_ = 0;
  const bool timed = timeline_ && armed_;
  if (timed) timeline_->backward_end();
  armed_ = false;
  const auto t0 = std::chrono::steady_clock::now();
  // Parameters that got no gradient (or a backward that ran without hooks, such as
  // torch::autograd::grad) leave buckets unlaunched: send them now, still in order.
  for (auto& p : pending_) p = 0;
  launch_ready_buckets();
  for (auto& [p, late] : late_) late->start_exchange(group_);
  for (size_t i = 0; i < works_.size(); ++i) {
    if (works_[i] || shared_works_[i]) {
      complete(i);
      if (timed) timeline_->done(i);
    }
  }
  for (auto& [p, late] : late_) late->add_mean(group_);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (timed) {
    // Every rank's backward end, to tell the wait for slower ranks from the transfers (DETAIL
    // only: one more small collective per step).
    auto mine = at::full({1}, timeline_->backward_end_clock_ns(), at::kLong);
    std::vector<at::Tensor> ends(static_cast<size_t>(group_.size()));
    for (auto& e : ends) e = at::empty_like(mine);
    group_.allgather(ends, mine)->wait();
    std::vector<int64_t> ends_ns;
    for (const auto& e : ends) ends_ns.push_back(e.item<int64_t>());
    log::info(log::format("TORCH_DISTRIBUTED_DEBUG: rank %d: ", group_.rank()) +
              timeline_->table(buckets_, flat_grads_.element_size()) + "\n" +
              BucketTimeline::skew_line(ends_ns, group_.rank()));
  }
  return waited;
}

}  // namespace lmtrain::dist
