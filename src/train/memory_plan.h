// What a run will hold per rank, computed from the config before any device memory is spent
// (the model is built uninitialised on the host, its flat layout made: 8 bytes per parameter
// of host memory), in the same accounting the run logs
// ("model state on this rank ... model_state_bytes_per_rank", train/trainer.cpp; the bench's
// model_state_bytes_per_rank):
//   parameters   fp32 master: the whole flat buffer, or ZeRO-3's shard (flat numel / G)
//   gradients    the same size as the parameters
//   optimizer    AdamW's two moments: whole (dist.zero=0) or one shard of them (ZeRO-1/2/3)
//   gathered     ZeRO-3 only, transient during a step: the root unit (embeddings, head, final
//                norm) plus the two largest blocks (the computing and the prefetched one)
//   activations  an estimate, not measured: the saved activations of one micro-batch
//                (B x T x C x L x 17 elements of the compute dtype without checkpointing, after
//                Korthikanti et al. with fused attention; the block inputs plus one block's set
//                with train.activation_checkpointing) and the logits with their gradient (fp32)
// Tensor parallelism (tp > 1) is an estimate of the plan: the blocks' matrices and the token
// table split T ways, the rest replicated, the data-parallel ranks N / T.
#pragma once
#include <cstdint>
#include <string>

#include "model/build_model.h"
#include "optim/optimizer_factory.h"
#include "train/batch_plan.h"

namespace lmtrain::train {

struct MemoryPlan {
  int nproc = 1, tp = 1, zero = 0, shard_ranks = 1;
  int64_t trained_parameters = 0;
  int64_t param_bytes = 0, grad_bytes = 0, optimizer_bytes = 0;
  int64_t gathered_peak_bytes = 0;
  int64_t activation_bytes = 0;
  int64_t model_state_bytes() const { return param_bytes + grad_bytes + optimizer_bytes; }
  int64_t peak_bytes() const {
    return model_state_bytes() + gathered_peak_bytes + activation_bytes;
  }
};

// compute_bytes: 4 for fp32, 2 for bf16/fp16. Throws UsageError for what it cannot plan
// (optim.name other than adamw, tp not dividing nproc).
MemoryPlan plan_memory(const model::ModelOptions& model, const optim::OptimizerOptions& optimizer,
                       const BatchPlan& batch, int nproc, int tp, int64_t compute_bytes);

// The plan as `lmtrain plan` prints it: one "key: value" line per figure.
std::string describe(const MemoryPlan& plan);

}  // namespace lmtrain::train
