// ZeRO-3 over several ranks: the set-up model sharded (train/trainer_parts.h).
#include "core/log.h"
#include "parallel/frozen_shard.h"
#include "train/trainer_parts.h"

namespace lmtrain::train {
namespace {

// The frozen parameters' bytes of the whole model: what this rank holds, except that a
// tensor-parallel rank holds 1/T of each split tensor (counted here at its whole shape).
int64_t whole_model_frozen_bytes(const RunSetup& s) {
  if (!s.tp) return parallel::frozen_param_bytes(*s.model);
  return parallel::frozen_param_bytes(*s.model, [&](const std::string& name, const at::Tensor& p) {
    auto slice = s.tp->slices().find(name);
    if (slice == s.tp->slices().end() || !slice->second.sharded()) return p.numel();
    int64_t numel = 1;
    for (int64_t d : slice->second.whole_shape) numel *= d;
    return numel;
  });
}

}  // namespace

std::unique_ptr<parallel::FullyShard> make_fully_shard(RunSetup& s, dist::Group& world,
                                                       const core::Runtime& rt) {
  const auto& o = s.options.optimizer;
  dist::Group& shard_group = s.shards.shard_group(world);
  if (o.zero != 3 || shard_group.size() == 1) {
    const int64_t whole = s.flat->numel() * s.flat->options().dtype().itemsize();
    log_model_state(s, whole, whole);
    log_frozen_state(parallel::frozen_param_bytes(*s.model), whole_model_frozen_bytes(s));
    return nullptr;
  }
  const auto wire = parallel::gather_dtype_for(rt.precision, s.tp != nullptr);
  // Under expert parallelism each rank's experts stay local and whole (parallel/moe_shard.h).
  auto fsdp = std::make_unique<parallel::FullyShard>(
      *s.model, *s.flat, shard_group, s.shards.replicas.get(), o.reshard_after_forward, wire,
      s.ep.active(), s.frozen_source);
  fsdp->set_reduce_dtype(rt.reduce_dtype);
  fsdp->install();
  const auto b = fsdp->bytes();
  log::info(log::format(
      "ZeRO-3: %zu units (root + %zu blocks) sharded over %d ranks%s, reshard_after_forward=%s, "
      "blocks' linear weights gathered in %s",
      fsdp->units().size(), fsdp->units().size() - 1, shard_group.size(),
      s.shards.replicas
          ? log::format(", replicated over %d groups (HSDP)", s.shards.replicas->size()).c_str()
          : "",
      o.reshard_after_forward ? "true" : "false", wire ? "bf16" : "fp32"));
  log_model_state(s, b.param_shard, b.grad_shard);
  log_frozen_state(b.frozen_shard, b.frozen_whole);
  return fsdp;
}

void log_shard_peaks(const parallel::FullyShard& fsdp) {
  const auto b = fsdp.bytes();
  log::info(log::format(
      "ZeRO-3 peaks: zero3_gathered_peak_bytes: %lld (blocks; largest block unit %lld bytes; "
      "the root unit's %lld bytes held during each step), unit gradient buffers %lld bytes",
      (long long)b.gathered_peak, (long long)b.largest_block, (long long)b.root_gathered,
      (long long)b.grad_buffers_peak));
}

}  // namespace lmtrain::train
