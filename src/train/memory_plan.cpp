#include "train/memory_plan.h"

#include <algorithm>

#include "core/error.h"
#include "core/log.h"
#include "core/runtime.h"
#include "optim/flat_params.h"
#include "parallel/shard_units.h"

namespace lmtrain::train {

MemoryPlan plan_memory(const model::ModelOptions& model, const optim::OptimizerOptions& optimizer,
                       const BatchPlan& batch, int nproc, int tp, int64_t compute_bytes) {
  if (optimizer.name != optim::OptimizerName::kAdamW) {
    throw UsageError("lmtrain plan: only optim.name=adamw is planned (its state is two moments)");
  }
  if (tp < 1 || nproc % tp != 0) {
    throw UsageError(log::format("lmtrain plan: --tp %d must divide --nproc %d", tp, nproc));
  }
  MemoryPlan p;
  p.nproc = nproc;
  p.tp = tp;
  p.zero = optimizer.zero;
  const int dp = nproc / tp;  // data-parallel ranks
  p.shard_ranks = optimizer.zero == 3 && optimizer.shard_group_size > 0
                      ? std::min(optimizer.shard_group_size, dp)
                      : dp;
  // Uninitialised weights on the host (never-touched pages); only the flat layout below writes
  // memory (8 bytes per parameter on the host). No device memory is used.
  // TODO: the meta device would spend none, but FlatParams' set_data refuses meta tensors.
  auto built = model::build_model(model, core::Runtime::cpu(), {/*init=*/false, {}});
  const int sharding = optimizer.zero > 0 ? p.shard_ranks : 1;
  optim::FlatParams flat(*built, built->param_tags(),
                         optim::flat_pad_multiple(optimizer, sharding));
  const int64_t elem = flat.options().dtype().itemsize();
  p.trained_parameters = flat.num_parameters();
  // Under tensor parallelism a rank holds 1/T of the blocks' matrices and of the token table.
  int64_t split = 0;
  for (const auto& seg : flat.segments()) {
    if (seg.block_matrix || seg.name == "transformer.wte.weight") split += seg.numel;
  }
  const int64_t numel = flat.numel() - split + split / tp;
  const int64_t shard = numel / sharding;
  const bool zero3 = optimizer.zero == 3 && p.shard_ranks > 1;
  p.param_bytes = (zero3 ? shard : numel) * elem;
  p.grad_bytes = p.param_bytes;
  p.optimizer_bytes = 2 * (optimizer.zero > 0 ? shard : numel) * elem;
  if (zero3) {
    const auto units = parallel::plan_shard_units(flat, model.shape.n_layer);
    std::vector<int64_t> blocks;
    for (size_t u = 1; u < units.size(); ++u) blocks.push_back(units[u].numel);
    std::sort(blocks.rbegin(), blocks.rend());
    int64_t gathered = units[0].numel;
    for (size_t i = 0; i < std::min<size_t>(2, blocks.size()); ++i) gathered += blocks[i];
    p.gathered_peak_bytes = gathered * elem / tp;
  }
  // Activations of one micro-batch (an estimate; see the header).
  const auto& s = model.shape;
  const int64_t tokens = batch.micro_batch * batch.seq_len;
  const int64_t per_layer = tokens * s.n_embd * 17 / tp * compute_bytes;
  int64_t recomputed = 0;  // blocks whose activations are recomputed in backward
  for (int64_t l = 0; l < s.n_layer; ++l) recomputed += model.checkpointing.applies_to(l) ? 1 : 0;
  const int64_t blocks = (s.n_layer - recomputed) * per_layer +
                         recomputed * tokens * s.n_embd * compute_bytes +
                         (recomputed > 0 ? per_layer : 0);
  p.activation_bytes = blocks + 2 * tokens * s.vocab_size / tp * 4;
  return p;
}

std::string describe(const MemoryPlan& p) {
  auto line = [](const char* key, int64_t bytes) {
    return log::format("%s: %lld (%.1f MiB)\n", key, (long long)bytes, bytes / 1048576.0);
  };
  return log::format("nproc: %d\ntp: %d\nzero: %d\nshard_ranks: %d\ntrained_parameters: %lld\n",
                     p.nproc, p.tp, p.zero, p.shard_ranks, (long long)p.trained_parameters) +
         line("parameter_bytes_per_rank", p.param_bytes) +
         line("gradient_bytes_per_rank", p.grad_bytes) +
         line("optimizer_bytes_per_rank", p.optimizer_bytes) +
         line("model_state_bytes_per_rank", p.model_state_bytes()) +
         line("gathered_peak_bytes", p.gathered_peak_bytes) +
         line("activation_bytes_estimate", p.activation_bytes) +
         line("peak_bytes_estimate", p.peak_bytes());
}

}  // namespace lmtrain::train
