#include "parallel/fully_shard.h"

#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "core/log.h"
#include "parallel/frozen_shard.h"
#include "parallel/moe_shard.h"

namespace lmtrain::parallel {

std::optional<at::ScalarType> gather_dtype_for(core::Precision precision, bool tensor_parallel) {
  if (precision != core::Precision::kBf16 || tensor_parallel) return std::nullopt;
  return at::kBFloat16;
}

FullyShard::FullyShard(
    model::GptImpl& model, optim::FlatParams& flat, dist::Group& group, dist::Group* replicas,
    bool reshard_after_forward, std::optional<at::ScalarType> wire_dtype, bool local_experts,
    const std::function<void(const std::string&, int64_t, const at::Tensor&)>& frozen_source)
    : model_(model),
      flat_(flat),
      group_(group),
      replicas_(replicas),
      reshard_(reshard_after_forward),
      wire_(wire_dtype) {
  // Under expert parallelism the shared region alone is sharded (ZeroAdamW's shards).
  const int64_t sharded = local_experts ? flat.expert_begin() : flat.numel();
  if (sharded % group.size() != 0) {
    throw Error("internal: FullyShard: the flat buffers do not split over the shard group");
  }
  shard_ = sharded / group.size();
  local_experts_ = flat.numel() - sharded;
  units_ = plan_shard_units(flat, model.config().n_layer);
  if (local_experts) units_ = units_without_experts(units_, flat);
  state_.resize(units_.size());
  torch::NoGradGuard no_grad;
  const auto& segs = flat.segments();
  // The blocks' linear weights (the root's head and embeddings stay exact: see the header).
  lowered_.resize(units_.size());
  for (size_t u = 1; wire_ && u < units_.size(); ++u) {
    for (size_t i : units_[u].segments) {
      if (gathered_in_compute_dtype(segs[i].name, segs[i].block_matrix))
        lowered_[u].emplace_back(segs[i].offset, segs[i].offset + segs[i].numel);
    }
  }
  // A flat layout born sharded (optim::ShardOnly, parallel/sharded_init.h) already holds this
  // rank's shard and no whole buffer: nothing to copy, the parameters (unwritten, on the CPU)
  // only move into their units' views.
  const bool born_sharded = flat.shard_only();
  if (born_sharded) (void)flat.param_slice(group.rank() * shard_, shard_);  // throws if not ours
  // One unit at a time, so the set-up holds the whole model (flat's parameter buffer) plus one
  // unit's buffers, never a second copy of the model: each unit's buffers are released before
  // the next one's are made (their views stay: the storage comes back at the unit's gather and
  // hold_grads, which zeroes the gradient buffer: until then it is never read).
  for (size_t u = 0; u < units_.size(); ++u) {
    auto& s = state_[u];
    const auto& unit = units_[u];
    s.params = torch::empty({unit.numel}, flat.options());
    s.grads = torch::empty({unit.numel}, flat.options());
    int64_t at = 0;
    for (const auto& [lo, hi] : unit.ranges) {
      if (!born_sharded) {
        s.params.narrow(0, at, hi - lo).copy_(flat.params().narrow(0, lo, hi - lo));
      }
      at += hi - lo;
    }
    // The model's parameters become views of the unit's buffers; set_data keeps each one's
    // autograd identity (its gradient accumulator and version counter).
    for (size_t i : unit.segments) {
      const auto& seg = segs[i];
      const int64_t off = unit.buffer_offset(seg.offset);
      auto p = flat.tensors()[i];
      p.set_data(s.params.narrow(0, off, seg.numel).view(seg.shape));
      p.mutable_grad() = s.grads.narrow(0, off, seg.numel).view(seg.shape);
    }
    release_storage(s.params);
    release_storage(s.grads);
  }
  // Nothing views the whole buffers any more: they go here, once the shard is copied out.
  if (!born_sharded) flat.keep_shard(group.rank() * shard_, shard_, local_experts);
  // Once the trained parameters are shards: the frozen ones, unit by unit.
  frozen_ = std::make_unique<FrozenShard>(model, group, units_.size(), wire_,
                                          FrozenSource{frozen_source, flat.options()});
}

FullyShard::~FullyShard() {
  // A step that threw leaves collectives in flight: they must end before their buffers go.
  for (auto& s : state_) {
    s.gathering.wait_quietly();
    s.reducing.wait_quietly();
  }
  uninstall();
}

void FullyShard::install() {
  model_.set_block_hooks(std::shared_ptr<model::BlockHooks>(this, [](model::BlockHooks*) {}));
}

void FullyShard::uninstall() { model_.set_block_hooks(nullptr); }

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

void FullyShard::begin_micro_step(bool last) {
  last_micro_ = last;
  for (auto& s : state_) s.pre_backward_done = false;
  issue_gather(0);
  wait_gather(0);
  hold_grads(0);
  if (units_.size() > 1) issue_gather(1);
}

void FullyShard::pre_backward(size_t u) {
  auto& s = state_[u];
  if (s.pre_backward_done) return;
  s.pre_backward_done = true;
  issue_gather(u);
  wait_gather(u);
  hold_grads(u);
  if (u > 1) issue_gather(u - 1);  // prefetch: the block before runs its backward next
}

void FullyShard::post_backward(size_t u) {
  release_params(u);
  if (!last_micro_) return;  // accumulation: the gradient buffer stays until the last
  launch_reduce(u);
  // At most two units' gradient buffers in flight: the oldest one's reduce-scatter has had
  // a block's backward to finish.
  while (reduce_order_.size() > 2) {
    wait_reduce(reduce_order_.front());
    reduce_order_.erase(reduce_order_.begin());
  }
}

at::Tensor FullyShard::before_block(int64_t layer, const at::Tensor& x) {
  const size_t u = static_cast<size_t>(layer) + 1;
  issue_gather(u);
  wait_gather(u);
  if (u + 1 < units_.size()) issue_gather(u + 1);  // prefetch the next block
  if (x.requires_grad()) {
    // x's gradient is complete once every gradient of block `layer` is accumulated (autograd
    // runs the accumulators first): then this block's backward is over, the one before starts.
    x.register_hook([this, u](const at::Tensor&) {
      post_backward(u);
      if (u > 1) pre_backward(u - 1);
    });
  }
  return x;
}

std::vector<at::Tensor> FullyShard::after_block(int64_t layer, std::vector<at::Tensor> outputs) {
  const size_t u = static_cast<size_t>(layer) + 1;
  if (reshard_ || !torch::GradMode::is_enabled()) release_params(u);
  // The last block's output (and any other output, e.g. MoE balance terms, whose gradient may
  // arrive first): its gradient starts the block's backward. Block L's y is block L+1's x,
  // whose hook (above) covers it after L+1's backward.
  const bool last_block = u + 1 == units_.size();
  for (size_t i = 0; i < outputs.size(); ++i) {
    auto& t = outputs[i];
    if (!t.defined() || !t.requires_grad() || (i == 0 && !last_block)) continue;
    t.register_hook([this, u](const at::Tensor&) { pre_backward(u); });
  }
  return outputs;
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

ShardBytes FullyShard::bytes() const {
  ShardBytes b;
  const int64_t item = flat_.options().dtype().itemsize();
  b.param_shard = (shard_ + local_experts_) * item;
  b.grad_shard = (shard_ + local_experts_) * item;
  b.gathered_peak = gathered_peak_;
  b.root_gathered = units_[0].numel * item + frozen_->unit_bytes(0);
  for (size_t u = 1; u < units_.size(); ++u) {
    b.largest_block = std::max(b.largest_block, units_[u].numel * item + frozen_->unit_bytes(u));
  }
  b.grad_buffers_peak = grads_peak_;
  b.frozen_shard = frozen_->shard_bytes();
  b.frozen_whole = frozen_->whole_bytes();
  return b;
}

}  // namespace lmtrain::parallel
