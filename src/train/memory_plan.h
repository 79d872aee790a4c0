// What a run will hold per rank, computed from the config before any device memory is spent
// (a census of the model's parameters, train/model_census.h: unwritten weights, no buffers), in
// the same accounting the run logs ("model state on this rank ... model_state_bytes_per_rank",
// train/trainer.cpp; the bench's model_state_bytes_per_rank):
//   parameters   fp32 master: the whole flat buffer, or ZeRO-3's shard (flat numel / G)
//   gradients    the same size as the parameters (ZeRO-1/2 keep the whole gradient buffer too:
//                optim/zero_adamw.h)
//   optimizer    AdamW's two moments: whole (dist.zero=0) or one shard of them (ZeRO-1/2/3)
//   gathered     ZeRO-3 only, transient during a step: the root unit (embeddings, head, final
//                norm) plus the two largest blocks (the computing and the prefetched one)
//   activations  an estimate of one micro-batch's (train/activation_estimate.h)
// Tensor parallelism (tp > 1): what parallel/tensor_parallel_plan.h slices (the blocks'
// projections, the token table, the LM head) split T ways, the rest replicated, the
// data-parallel ranks N / T. Expert parallelism (ep > 1): each rank holds
// num_experts / ep of every expert stack, with its whole Adam state (its replicas update it
// alike); ZeRO shards only the shared region, over all N ranks (optim/zero_adamw.h).
#pragma once
#include <cstdint>
#include <string>

#include "model/build_model.h"
#include "train/activation_estimate.h"
#include "train/model_census.h"

namespace lmtrain::train {

// The parallel layout of a run: dist.tp, dist.ep, dist.zero, dist.shard_group_size,
// dist.reshard_after_forward at `nproc` ranks.
struct PlanLayout {
  int nproc = 1, tp = 1, ep = 1, zero = 0;
  int shard_group_size = 0;  // ZeRO-3 HSDP: ranks per shard group; 0 = all data-parallel ranks
  bool reshard_after_forward = true;
  int dp() const { return nproc / tp; }  // data-parallel ranks
  // The ranks ZeRO shards over: dp, or the HSDP group under ZeRO-3; 1 without ZeRO.
  int shard_ranks() const;
  // "ZeRO-3 HSDP 8x4", "TP 4 + ZeRO-1", "EP 8 + ZeRO-2": a table row's name.
  std::string describe() const;
};

// Why `layout` cannot run `model` (empty: it can): tp / ep / the HSDP group not dividing
// what they split, combinations the trainer refuses (read_options.cpp's, tensor_parallel_plan's).
std::string layout_problem(const model::ModelOptions& model, const PlanLayout& layout,
                           int64_t seq_len);

struct MemoryPlan {
  PlanLayout layout;
  int64_t trained_parameters = 0;
  int64_t shared_numel = 0;  // elements of the flat buffers' shared region on a rank (padded)
  int64_t expert_numel = 0;  // of its expert region (this rank's experts)
  int64_t param_bytes = 0, grad_bytes = 0, optimizer_bytes = 0;
  int64_t gathered_peak_bytes = 0;
  int64_t gathered_root_bytes = 0, gathered_blocks_bytes = 0;  // ZeRO-3: all blocks together
  int64_t gathered_block_matrix_bytes = 0;  // of which the blocks' linear weights (fp32)
  // Frozen parameters (a LoRA base; not model state: no gradient, no moments), held on a rank
  // between uses (ZeRO-3: its pieces), and whole. ZeRO-3 gathers them with their unit (in the
  // gathered figures above).
  int64_t frozen_bytes = 0, frozen_whole_bytes = 0;
  int64_t activation_bytes = 0;  // micro_batch x activation_per_sample
  int64_t activation_per_sample = 0;
  int64_t micro_batch = 1;
  int64_t model_state_bytes() const { return param_bytes + grad_bytes + optimizer_bytes; }
  int64_t peak_bytes() const {
    return model_state_bytes() + frozen_bytes + gathered_peak_bytes + activation_bytes;
  }
  // The largest micro-batch whose peak fits `device_bytes` (0: not even the model state does).
  int64_t largest_micro_batch(int64_t device_bytes) const;
};

// The plan of `census` under `layout` at `micro_batch` rows of `act`'s shape. Throws
// UsageError where layout_problem() names one.
MemoryPlan plan_memory(const ModelCensus& census, const model::ModelOptions& model,
                       const PlanLayout& layout, const ActivationShape& act, int64_t micro_batch);

// The plan as `lmtrain plan` prints it: one "key: value" line per figure.
std::string describe(const MemoryPlan& plan);

}  // namespace lmtrain::train
