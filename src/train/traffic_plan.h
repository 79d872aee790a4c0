// The bytes one rank sends per optimizer step under a layout, by collective kind, counted as
// distributed/comm_bytes.h counts a run's (the ring algorithms' traffic, the ZeRO paper's
// accounting: an all-reduce of S over W ranks sends 2 (W-1)/W S, a reduce-scatter or a
// broadcast (W-1)/W S, an all-gather of S per rank (W-1) S), from the memory plan's flat
// layout (train/memory_plan.h). Ψ below is a rank's shared flat region (padded), in bytes of
// fp32 or of train.grad_reduce_dtype for gradients:
//   ZeRO-0   all-reduce of the gradients: 2 (D-1)/D Ψ (D data-parallel ranks)
//   ZeRO-1/2 reduce-scatter (D-1)/D Ψ, then the updated shards broadcast: (D-1)/D Ψ; together
//            DDP's bytes (optim/zero_adamw.h)
//   ZeRO-3   each block gathered in forward and again in backward (once without
//            reshard_after_forward), the root unit once, by broadcasts: (G-1)/G of each (the
//            blocks' linear weights in bf16 under bf16_gathers, parallel/fully_shard.h); the
//            gradients reduce-scattered (G-1)/G Ψ; under HSDP the shard then all-reduced over
//            the R = D / G replicas: 2 (R-1)/R Ψ / G
//   TP T     per block and micro-step 4 all-gathers and 4 reduce-scatters of the (B, T_seq, C)
//            activations in the compute dtype (sequence parallelism, forward and backward),
//            2 more for the head's gather, each (T-1)/T of the whole; Ψ is then 1/T of the
//            split matrices
//   EP E     per MoE layer and micro-step 4 all-to-alls (dispatch and combine, forward and
//            backward) of B T_seq top_k rows of C, (E-1)/E of them leaving the rank when the
//            router spreads tokens evenly; the experts' gradients all-reduced over their
//            N / E replicas
// Not counted: the loss sums, gradient norm and other scalars (a few bytes), the tied table's
// late rows (ZeRO-0 all-gathers the step's token rows instead of part of the all-reduce),
// start-up broadcasts and checkpoints.
#pragma once
#include <cstdint>
#include <string>

#include "distributed/comm_bytes.h"
#include "model/build_model.h"
#include "train/memory_plan.h"

namespace lmtrain::train {

struct TrafficInputs {
  int64_t micro_batch = 1, accum_steps = 1, seq_len = 0;
  int64_t compute_bytes = 4;      // activations crossing TP / EP collectives
  int64_t grad_reduce_bytes = 4;  // 2 with train.grad_reduce_dtype=bf16
  bool bf16_gathers = false;      // bf16 runs: ZeRO-3's block matrices travel in bf16 (TP 1 only)
};

dist::CommBytes plan_traffic(const MemoryPlan& plan, const model::ModelOptions& model,
                             const TrafficInputs& in);

// "sent_bytes_per_step: ... (all-reduce ..., ...)" lines as `lmtrain plan` prints them.
std::string describe_traffic(const dist::CommBytes& bytes);

}  // namespace lmtrain::train
