// A ZeRO-3 step's and an evaluation's bounds (parallel/fully_shard.h): the root unit gathered
// and block 0's gather issued when a micro-step begins; at the step's end the reduce-scatters
// backward did not launch, the waits, HSDP's all-reduce over the replicas and every buffer
// released; evaluation's forward-only begin and end.
#include <chrono>

#include "parallel/fully_shard.h"

namespace lmtrain::parallel {

void FullyShard::begin_micro_step(bool last) {
  last_micro_ = last;
  for (auto& s : state_) s.pre_backward_done = false;
  issue_gather(0);
  wait_gather(0);
  hold_grads(0);
  if (units_.size() > 1) issue_gather(1);
}

double FullyShard::finish() {
  const auto t0 = std::chrono::steady_clock::now();
  // Units whose input hook did not fire (the root always; a block whose input needs no
  // gradient), in unit order on every rank.
  for (size_t u = units_.size(); u-- > 0;) launch_reduce(u);
  for (size_t u : reduce_order_) wait_reduce(u);
  reduce_order_.clear();
  if (replicas_ && replicas_->size() > 1) {
    // HSDP: the shard's gradient averaged over the groups too (every rank of a replica group
    // holds the same shard).
    auto g = flat_.grad_slice(group_.rank() * shard_, shard_);
    if (reduce_dtype_) {
      auto low = g.to(*reduce_dtype_);
      replicas_->allreduce(low, dist::ReduceOp::kAvg)->wait();
      g.copy_(low);
    } else {
      replicas_->allreduce(g, dist::ReduceOp::kAvg)->wait();
    }
  }
  for (size_t u = 0; u < units_.size(); ++u) {
    release_params(u);
    state_[u].reduced = false;
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void FullyShard::begin_forward_only() {
  issue_gather(0);
  wait_gather(0);
}

void FullyShard::end_forward_only() {
  // The root, and a block a forward prefetched but did not reach (it ends at the last block).
  for (size_t u = 0; u < units_.size(); ++u) release_params(u);
}

}  // namespace lmtrain::parallel
