// FullyShard's set-up (parallel/fully_shard.h): each unit's parameter and gradient buffers,
// the model's parameters made views of them, the whole flat buffers cut down to this rank's
// shard, the frozen parameters' shards; installing the block hooks; the bytes held. A unit's
// gathers are in fully_shard_gather.cpp, the block hooks in fully_shard_hooks.cpp, a step's
// begin and finish in fully_shard_step.cpp, the gradients' reduce-scatter in
// fully_shard_reduce.cpp.
#include "parallel/fully_shard.h"

#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>

#include "core/error.h"
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
