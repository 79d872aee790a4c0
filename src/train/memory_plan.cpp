#include "train/memory_plan.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "parallel/moe_shard.h"

namespace lmtrain::train {
namespace {

int64_t round_up(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

}  // namespace

int PlanLayout::shard_ranks() const {
  if (zero == 0) return 1;
  return zero == 3 && shard_group_size > 0 ? std::min(shard_group_size, dp()) : dp();
}

std::string PlanLayout::describe() const {
  std::string s;
  if (tp > 1) s += "TP " + std::to_string(tp) + " + ";
  if (ep > 1) s += "EP " + std::to_string(ep) + " + ";
  s += "ZeRO-" + std::to_string(zero);
  if (zero == 3 && shard_group_size > 0 && shard_group_size < dp()) {
    s += log::format(" HSDP %dx%d", shard_group_size, dp() / shard_group_size);
  }
  if (zero == 3 && !reshard_after_forward) s += " (no reshard)";
  return s;
}

std::string layout_problem(const model::ModelOptions& model, const PlanLayout& l, int64_t seq_len) {
  const auto& s = model.shape;
  auto divides = [](int64_t d, int64_t n) { return d >= 1 && n % d == 0; };
  if (l.nproc < 1) return "nproc must be at least 1";
  if (!divides(l.tp, l.nproc)) return log::format("tp %d does not divide %d ranks", l.tp, l.nproc);
  if (l.zero < 0 || l.zero > 3) return "dist.zero is 0 to 3";
  if (l.tp > 1) {
    // MoE runs with its experts replicated over the TP group (parallel/tensor_parallel_plan.h).
    if (l.ep > 1) return "tensor parallelism does not combine with expert parallelism yet";
    if (!divides(l.tp, s.n_head) || !divides(l.tp, s.kv_heads())) {
      return log::format("tp %d does not divide the %lld query / %lld key-value heads", l.tp,
                         (long long)s.n_head, (long long)s.kv_heads());
    }
    if (!divides(l.tp, s.hidden_dim()) || !divides(l.tp, s.vocab_size) || !divides(l.tp, seq_len)) {
      return log::format("tp %d does not divide the MLP width, the vocabulary or seq_len", l.tp);
    }
  }
  if (l.ep > 1) {
    if (!s.moe.enabled()) return "expert parallelism needs an MoE model";
    if (!divides(l.ep, l.nproc) || !divides(l.ep, s.moe.num_experts)) {
      return log::format("ep %d must divide the %d ranks and the %lld experts", l.ep, l.nproc,
                         (long long)s.moe.num_experts);
    }
  }
  if (l.shard_group_size > 0) {
    if (l.zero != 3) return "dist.shard_group_size applies to dist.zero=3";
    if (!divides(l.shard_group_size, l.dp())) {
      return log::format("shard group %d does not divide %d ranks", l.shard_group_size, l.dp());
    }
  }
  return {};
}

int64_t MemoryPlan::largest_micro_batch(int64_t device_bytes) const {
  const int64_t room = device_bytes - model_state_bytes() - frozen_bytes - gathered_peak_bytes;
  if (room <= 0 || activation_per_sample <= 0) return 0;
  return room / activation_per_sample;
}

MemoryPlan plan_memory(const ModelCensus& census, const model::ModelOptions& model,
                       const PlanLayout& layout, const ActivationShape& act, int64_t micro_batch) {
  const std::string problem = layout_problem(model, layout, act.seq_len);
  if (!problem.empty()) throw UsageError("lmtrain plan: " + problem);
  MemoryPlan p;
  p.layout = layout;
  p.micro_batch = micro_batch;
  p.trained_parameters = census.trained_parameters();
  const int tp = layout.tp, ep = layout.ep, sharding = layout.shard_ranks();
  const int64_t elem = 4;  // fp32 master parameters, gradients and moments
  // The flat layout of one rank (optim/flat_params.h): shared segments, padded to 16 x the
  // shard ranks, then this rank's part of the expert stacks; TP keeps 1/T of the split ones.
  // Without expert parallelism the expert stacks are ordinary parameters (optim/zero_adamw.h).
  int64_t shared = 0, experts = 0;
  std::vector<int64_t> unit_numel(static_cast<size_t>(census.n_layer + 1), 0);
  int64_t block_matrices = 0;  // the blocks' linear weights, as gathered on a rank
  for (const auto& e : census.entries) {
    const bool own_region = e.expert && ep > 1;
    const int64_t n = own_region ? e.aligned / ep : e.tp_split ? e.aligned / tp : e.aligned;
    (own_region ? experts : shared) += n;
    if (!own_region) unit_numel[e.unit] += n;  // ZeRO-3 keeps a rank's experts local (EP)
    if (e.unit > 0 && !own_region && parallel::gathered_in_compute_dtype(e.name, e.block_matrix)) {
      block_matrices += n;
    }
  }
  const int64_t multiple = 16 * static_cast<int64_t>(sharding);
  const bool zero3 = layout.zero == 3 && sharding > 1;
  // Frozen parameters: whole on every rank, or under ZeRO-3 each unit's laid back to back and
  // padded to 16 x the shard ranks, 1/N of it per rank (parallel/frozen_shard.h); a unit's are
  // gathered with it (its bf16 runs send the blocks' frozen linear weights in bf16 too).
  // Under TP a rank holds 1/T of the split ones (a LoRA base's matrices and tables).
  std::vector<int64_t> frozen_unit(unit_numel.size(), 0);
  int64_t frozen_held = 0;  // elements of this rank's (TP) part, before any ZeRO-3 sharding
  for (const auto& e : census.frozen) {
    const int64_t aligned = e.tp_split ? e.aligned / tp : e.aligned;
    frozen_unit[e.unit] += aligned;
    frozen_held += e.tp_split ? e.numel / tp : e.numel;
    p.frozen_whole_bytes += e.numel * elem;
    if (e.unit > 0 && parallel::gathered_in_compute_dtype(e.name, e.block_matrix)) {
      block_matrices += aligned;
    }
  }
  for (size_t u = 0; u < frozen_unit.size(); ++u) {
    if (zero3) p.frozen_bytes += round_up(frozen_unit[u], multiple) / sharding * elem;
    unit_numel[u] += frozen_unit[u];
  }
  if (!zero3) p.frozen_bytes = frozen_held * elem;
  p.shared_numel = round_up(shared, multiple);
  p.expert_numel = experts;
  const int64_t numel = round_up(p.shared_numel + experts, multiple);
  p.param_bytes = (zero3 ? p.shared_numel / sharding + (numel - p.shared_numel) : numel) * elem;
  p.grad_bytes = p.param_bytes;
  // ZeRO shards the shared region; each rank keeps its experts' whole state.
  const int64_t moments = layout.zero > 0 ? p.shared_numel / sharding + experts : numel;
  p.optimizer_bytes = 2 * moments * elem;
  if (zero3) {
    std::vector<int64_t> blocks(unit_numel.begin() + 1, unit_numel.end());
    std::sort(blocks.rbegin(), blocks.rend());
    int64_t gathered = unit_numel[0];
    for (size_t i = 0; i < std::min<size_t>(2, blocks.size()); ++i) gathered += blocks[i];
    p.gathered_peak_bytes = gathered * elem;
    p.gathered_root_bytes = unit_numel[0] * elem;
    for (int64_t b : blocks) p.gathered_blocks_bytes += b * elem;
    p.gathered_block_matrix_bytes = block_matrices * elem;
  }
  p.activation_per_sample = activation_bytes_per_sample(model, act, tp);
  p.activation_bytes = micro_batch * p.activation_per_sample;
  return p;
}

std::string describe(const MemoryPlan& p) {
  auto line = [](const char* key, int64_t bytes) {
    return log::format("%s: %lld (%.1f MiB)\n", key, (long long)bytes, bytes / 1048576.0);
  };
  const auto& l = p.layout;
  return log::format(
             "nproc: %d\ntp: %d\nep: %d\nzero: %d\nshard_ranks: %d\ntrained_parameters: %lld\n",
             l.nproc, l.tp, l.ep, l.zero, l.shard_ranks(), (long long)p.trained_parameters) +
         line("parameter_bytes_per_rank", p.param_bytes) +
         line("gradient_bytes_per_rank", p.grad_bytes) +
         line("optimizer_bytes_per_rank", p.optimizer_bytes) +
         line("model_state_bytes_per_rank", p.model_state_bytes()) +
         line("frozen_bytes_per_rank", p.frozen_bytes) +
         line("gathered_peak_bytes", p.gathered_peak_bytes) +
         log::format("micro_batch: %lld\n", (long long)p.micro_batch) +
         line("activation_bytes_per_sample", p.activation_per_sample) +
         line("activation_bytes_estimate", p.activation_bytes) +
         line("peak_bytes_estimate", p.peak_bytes());
}

}  // namespace lmtrain::train
