// ZeRO-3's parameter side (parallel/fully_shard.h): a unit's gather, each rank's piece of
// each range broadcast by its owner into the unit's buffer (the blocks' linear weights in the
// wire dtype, widened on arrival), the wait for it, and the release of its memory; with the
// unit's frozen parameters alongside (parallel/frozen_shard.h).
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>

#include "parallel/frozen_shard.h"
#include "parallel/fully_shard.h"

namespace lmtrain::parallel {

int64_t FullyShard::gathered_block_bytes() const {
  int64_t n = 0;
  for (size_t u = 1; u < units_.size(); ++u) {
    if (state_[u].gathered) {
      n += units_[u].numel * flat_.options().dtype().itemsize() + frozen_->unit_bytes(u);
    }
  }
  return n;
}

void FullyShard::issue_gather(size_t u) {
  auto& s = state_[u];
  if (s.gathered) return;
  restore_storage(s.params, units_[u].numel * static_cast<int64_t>(s.params.element_size()));
  s.gathered = true;
  frozen_->issue(u);
  // The blocks gathered at once, by a step or an evaluation.
  gathered_peak_ = std::max(gathered_peak_, gathered_block_bytes());
  torch::NoGradGuard no_grad;
  const int me = group_.rank();
  int64_t at = 0;
  // Each rank's piece of each range, broadcast by its owner in place into the buffer: an
  // all-gather with uneven pieces and no staging copy (as ZeroAdamW's stage-1/2 all-gather).
  for (const auto& [lo, hi] : units_[u].ranges) {
    for (int q = 0; q < group_.size(); ++q) {
      const auto [a, b] = shard_piece(lo, hi, q, shard_);
      if (a == b) continue;
      if (lowered_[u].empty()) {
        gather_piece(u, a, b, q, s.params.narrow(0, at + a - lo, b - a));
        continue;
      }
      // Cut the piece where it enters or leaves a lowered range: runs of one kind each.
      int64_t from = a;
      for (const auto& [la, lb] : lowered_[u]) {
        const int64_t x = std::max(la, from), y = std::min(lb, b);
        if (x >= y) continue;
        if (from < x) gather_piece(u, from, x, q, s.params.narrow(0, at + from - lo, x - from));
        const auto dest = s.params.narrow(0, at + x - lo, y - x);
        auto wire = torch::empty({y - x}, flat_.options().dtype(*wire_));
        if (q == me) wire.copy_(flat_.param_slice(x, y - x));
        s.gathering.works.push_back(group_.broadcast(wire, q));
        s.gathering.widen.emplace_back(wire, dest);
        from = y;
      }
      if (from < b) gather_piece(u, from, b, q, s.params.narrow(0, at + from - lo, b - from));
    }
    at += hi - lo;
  }
}

void FullyShard::gather_piece(size_t u, int64_t a, int64_t b, int q, const at::Tensor& dest) {
  auto d = dest;
  if (q == group_.rank()) d.copy_(flat_.param_slice(a, b - a));
  state_[u].gathering.works.push_back(group_.broadcast(d, q));
}

void FullyShard::wait_gather(size_t u) {
  // The owner widens its own rounded copy too, so every rank holds the same values.
  state_[u].gathering.finish();
  frozen_->wait(u);
}

void FullyShard::release_params(size_t u) {
  auto& s = state_[u];
  if (!s.gathered) return;
  wait_gather(u);  // never free memory a collective still writes
  release_storage(s.params);
  frozen_->release(u);
  s.gathered = false;
}

}  // namespace lmtrain::parallel
