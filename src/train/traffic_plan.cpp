#include "train/traffic_plan.h"

#include "core/log.h"

namespace lmtrain::train {
namespace {

// (W-1)/W of `bytes`: what a rank sends of a ring reduce-scatter, broadcast or all-gather.
int64_t ring_part(int64_t bytes, int w) { return w > 1 ? bytes * (w - 1) / w : 0; }

}  // namespace

dist::CommBytes plan_traffic(const MemoryPlan& plan, const model::ModelOptions& model,
                             const TrafficInputs& in) {
  const PlanLayout& l = plan.layout;
  dist::CommBytes b;
  const int d = l.dp();
  const int64_t grads = plan.shared_numel * in.grad_reduce_bytes;  // Ψ of the gradients
  const int64_t params = plan.shared_numel * 4;                    // fp32 parameters
  if (l.zero == 0) {
    b.all_reduce += 2 * ring_part(grads, d);
  } else if (l.zero < 3 || l.shard_ranks() == 1) {
    b.reduce_scatter += ring_part(grads, d);
    b.broadcast += ring_part(params, d);
  } else {
    const int g = l.shard_ranks(), replicas = d / g;
    const int64_t gathers = l.reshard_after_forward ? 2 : 1;
    // bf16 gathers apply without tensor parallelism only (parallel::gather_dtype_for).
    const bool bf16 = in.bf16_gathers && l.tp == 1;
    const int64_t blocks =
        plan.gathered_blocks_bytes - (bf16 ? plan.gathered_block_matrix_bytes / 2 : 0);
    b.broadcast +=
        ring_part(plan.gathered_root_bytes, g) + in.accum_steps * gathers * ring_part(blocks, g);
    b.reduce_scatter += ring_part(grads, g);  // in train.grad_reduce_dtype, as ZeRO-1/2
    b.all_reduce += 2 * ring_part(grads / g, replicas);
  }
  const auto& s = model.shape;
  const int64_t rows = in.micro_batch * in.seq_len;  // a micro-step's tokens on this rank
  if (l.tp > 1) {
    // Sequence parallelism: each crossing moves the whole (B, T_seq, C) activation.
    const int64_t act = rows * s.n_embd * in.compute_bytes;
    const int64_t per_micro = 4 * s.n_layer + 1;  // of each kind: 4 per block, 1 for the head
    b.all_gather += in.accum_steps * per_micro * ring_part(act, l.tp);
    b.reduce_scatter += in.accum_steps * per_micro * ring_part(act, l.tp);
  }
  if (s.moe.enabled() && l.ep > 1) {
    const int64_t routed = rows * s.moe.top_k * s.n_embd * in.compute_bytes;
    b.all_to_all += in.accum_steps * 4 * s.moe.moe_layers(s.n_layer) * ring_part(routed, l.ep);
  }
  if (l.ep > 1) {
    // The experts' gradients over the ranks holding the same experts (with ep = 1 they are
    // part of the shared region above).
    b.all_reduce += 2 * ring_part(plan.expert_numel * in.grad_reduce_bytes, l.nproc / l.ep);
  }
  return b;
}

std::string describe_traffic(const dist::CommBytes& b) {
  return log::format(
      "sent_bytes_per_step: %lld (%.1f MiB)\n"
      "sent_all_reduce_bytes: %lld\nsent_reduce_scatter_bytes: %lld\n"
      "sent_broadcast_bytes: %lld\nsent_all_gather_bytes: %lld\nsent_all_to_all_bytes: %lld\n",
      (long long)b.total(), b.total() / 1048576.0, (long long)b.all_reduce,
      (long long)b.reduce_scatter, (long long)b.broadcast, (long long)b.all_gather,
      (long long)b.all_to_all);
}

}  // namespace lmtrain::train
