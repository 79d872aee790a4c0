// GradSync's bucket collectives (distributed/grad_sync.h): the buckets launched strictly in
// launch order, each divided by the world size and sent by its mode's collective (all-reduce,
// reduce-scatter for ZeRO-1/2, to owners plus all-reduce for DistMuon), in reduce_dtype where set.
#include <algorithm>
#include <vector>

#include "distributed/grad_sync.h"

namespace lmtrain::dist {

void GradSync::launch_ready_buckets() {
  while (next_launch_ < launch_order_.size() && pending_[launch_order_[next_launch_]] == 0) {
    launch(launch_order_[next_launch_++]);
  }
}

void GradSync::launch(size_t i) {
  launch_work(i);
  if (!timeline_) return;
  timeline_->launched(i);
  if (works_[i]) works_[i]->on_complete([timeline = timeline_, i] { timeline->done(i); });
}

void GradSync::launch_work(size_t i) {
  const auto& b = buckets_[i];
  auto slice = flat_grads_.narrow(0, b.begin, b.end - b.begin);
  // Divided by the world size here, then summed (PyTorch DDP's order): the divide runs while
  // earlier buckets are in flight instead of after the wait in finish(), and in fp32 before any
  // lowering. Exact for a power-of-two world; otherwise it rounds each term, not the sum. Every
  // path divides the same way, so sharded and replicated gradients stay bitwise equal. Owner
  // mode divides its packed copies: a parameter another rank owns keeps its local gradient.
  if (!owners_.empty()) {
    launch_to_owners(i);
    return;
  }
  slice.div_(group_.size());
  if (!reduce_scatter_) {
    if (reduce_dtype_) {
      lowered_[i] = slice.to(*reduce_dtype_);
      works_[i] = group_.allreduce(lowered_[i], ReduceOp::kSum);
    } else {
      works_[i] = group_.allreduce(slice, ReduceOp::kSum);
    }
    return;
  }
  // The part of the bucket in rank q's shard goes to rank q; this rank's part comes back
  // averaged, in place. The parts are adjacent views of the bucket, so nothing is copied
  // (with reduce_dtype: views of the bucket's lowered copy, whose own part complete() writes
  // back; the rest of the fp32 buffer keeps this rank's local gradient, as in fp32).
  if (reduce_dtype_) lowered_[i] = slice.to(*reduce_dtype_);
  const at::Tensor& source = reduce_dtype_ ? lowered_[i] : slice;
  std::vector<at::Tensor> parts;
  for (int q = 0; q < group_.size(); ++q) {
    const int64_t lo = std::clamp(q * shard_, b.begin, b.end);
    const int64_t hi = std::clamp((q + 1) * shard_, b.begin, b.end);
    parts.push_back(source.narrow(0, lo - b.begin, hi - lo));
  }
  auto own = parts[group_.rank()];
  works_[i] = group_.reduce_scatter(own, parts, ReduceOp::kSum);
}

at::Tensor GradSync::pack(size_t i, int owner) const {
  std::vector<at::Tensor> pieces;
  for (size_t p : buckets_[i].params) {
    if (owners_[p] == owner) {
      pieces.push_back(flat_grads_.narrow(0, ranges_[p].first, ranges_[p].second));
    }
  }
  return pieces.empty() ? at::empty({0}, flat_grads_.options()) : at::cat(pieces);
}

void GradSync::unpack(size_t i, int owner, const at::Tensor& packed) {
  int64_t at = 0;
  for (size_t p : buckets_[i].params) {
    if (owners_[p] != owner) continue;
    flat_grads_.narrow(0, ranges_[p].first, ranges_[p].second)
        .copy_(packed.narrow(0, at, ranges_[p].second));
    at += ranges_[p].second;
  }
}

void GradSync::launch_to_owners(size_t i) {
  // Every rank has the same buckets and owners, so all take the same branches here.
  std::vector<at::Tensor> to_rank;
  bool owned = false;
  for (int q = 0; q < group_.size(); ++q) {
    to_rank.push_back(pack(i, q).div_(group_.size()));
    owned |= to_rank.back().numel() > 0;
  }
  if (owned) {
    received_[i] = at::empty_like(to_rank[group_.rank()]);
    works_[i] = group_.reduce_scatter(received_[i], to_rank, ReduceOp::kSum);
  }
  shared_[i] = pack(i, -1).div_(group_.size());
  if (shared_[i].numel() > 0) shared_works_[i] = group_.allreduce(shared_[i], ReduceOp::kSum);
}

}  // namespace lmtrain::dist
