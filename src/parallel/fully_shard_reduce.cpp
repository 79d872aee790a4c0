// ZeRO-3's gradient side (parallel/fully_shard.h): each unit's unsharded gradient buffer, held
// from its backward, divided by the shard group's size and reduce-scattered (in
// train.grad_reduce_dtype) into this rank's fp32 gradient shard, as ZeRO-2's GradSync does, so
// ZeRO-3 stays bit for bit ZeRO-2; the buffer is released once its reduce-scatter is waited on.
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>

#include "parallel/fully_shard.h"

namespace lmtrain::parallel {

void FullyShard::set_reduce_dtype(at::ScalarType dtype) {
  if (dtype == flat_.options().dtype().toScalarType()) {
    reduce_dtype_.reset();
  } else {
    reduce_dtype_ = dtype;
  }
}

void FullyShard::hold_grads(size_t u) {
  auto& s = state_[u];
  if (s.grads_held) return;
  restore_storage(s.grads, units_[u].numel * static_cast<int64_t>(s.grads.element_size()));
  s.grads.zero_();
  s.grads_held = true;
  int64_t held = 0;
  for (size_t v = 0; v < units_.size(); ++v) {
    if (state_[v].grads_held) held += units_[v].numel * s.grads.element_size();
  }
  grads_peak_ = std::max(grads_peak_, held);
}

void FullyShard::launch_reduce(size_t u) {
  auto& s = state_[u];
  if (s.reduced) return;
  s.reduced = true;
  hold_grads(u);  // a unit that got no gradient reduces zeros, as ZeRO-2 does
  torch::NoGradGuard no_grad;
  const int me = group_.rank();
  // Divided by the world size, then summed: GradSync's order for ZeRO-2 (the same rounding, so
  // ZeRO-3 stays bitwise equal to it at any world size).
  s.grads.div_(group_.size());
  // train.grad_reduce_dtype: the lowered copy travels (GradSync's order: divide, then lower).
  if (reduce_dtype_) s.reducing.sources.push_back(s.grads.to(*reduce_dtype_));
  const at::Tensor source = reduce_dtype_ ? s.reducing.sources.back() : s.grads;
  int64_t at = 0;
  for (const auto& [lo, hi] : units_[u].ranges) {
    // The piece of the range in shard q goes to rank q; this rank's comes back averaged, in
    // rank order, straight into its gradient shard (ZeRO-2's GradSync reduce-scatter).
    std::vector<at::Tensor> parts;
    for (int q = 0; q < group_.size(); ++q) {
      const auto [a, b] = shard_piece(lo, hi, q, shard_);
      parts.push_back(source.narrow(0, at + a - lo, b - a));
    }
    const auto [a, b] = shard_piece(lo, hi, me, shard_);
    at::Tensor out = a < b ? flat_.grad_slice(a, b - a) : at::empty({0}, flat_.options());
    if (reduce_dtype_) {
      s.reducing.widen.emplace_back(at::empty({b - a}, source.options()), out);
      out = s.reducing.widen.back().first;
    }
    s.reducing.works.push_back(group_.reduce_scatter(out, parts, dist::ReduceOp::kSum));
    at += hi - lo;
  }
  reduce_order_.push_back(u);
}

void FullyShard::wait_reduce(size_t u) {
  auto& s = state_[u];
  s.reducing.finish();  // the summed pieces widened into the fp32 shard
  if (s.grads_held) {
    release_storage(s.grads);
    s.grads_held = false;
  }
}

}  // namespace lmtrain::parallel
