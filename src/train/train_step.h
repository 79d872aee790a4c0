// One optimizer step: accumulate gradients over micro-batches, average them across ranks,
// clip by global norm, update. Shared by `train` and `bench`. What is minimised is the injected
// Objective (objective.h; default the LM loss), normalised by the global count of valid target
// tokens.
//
// On CUDA nothing here waits for the device: the loss and the gradient norm stay device
// tensors (read by the caller when it logs), and clipping scales by a device-side coefficient.
// The forward runs under autocast when the runtime computes in bf16/fp16; fp16 adds the loss
// scaler (optim/loss_scaler.h). On CUDA (with AdamW, replicated or ZeRO) the scaler lives on the
// device and the optimizer skips an overflowing step there, so an fp16 step reads nothing on the
// host either; elsewhere (the CPU, Muon) the step reads one flag to decide whether to skip.
//
// Across ranks, gradients are averaged by dist::GradSync: bucket all-reduces start from
// gradient hooks during the last micro-step's backward, so communication overlaps compute.
//
// With one worker, autograd accumulates straight into the flat gradient buffer. With k > 1
// workers (see step_workers.h), each micro-batch is split into k row slices processed
// concurrently; each slice's gradients go to the worker's own buffer and the buffers are summed
// in order, which keeps the step deterministic.
#pragma once
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "core/runtime.h"
#include "distributed/grad_sync.h"
#include "distributed/group.h"
#include "model/dropout.h"
#include "model/gpt.h"
#include "objective/objective.h"
#include "observe/moe_step_stats.h"
#include "optim/flat_params.h"
#include "optim/loss_scaler.h"
#include "optim/optimizer.h"
#include "parallel/deferred_table_grad.h"
#include "parallel/expert_parallel.h"
#include "parallel/fully_shard.h"
#include "parallel/tensor_parallel_plan.h"
#include "train/step_workers.h"

namespace lmtrain::train {

struct StepResult {
  at::Tensor loss;         // float64 scalar on the device: mean over the global batch's valid
                           // target tokens of the objective's per-token loss
  at::Tensor grad_norm;    // float64 scalar on the device: before clipping (inf when skipped)
  double comm_wait_s = 0;  // time blocked on gradient all-reduce after backward (not hidden)
  at::Tensor skipped;      // fp16: float32 0-dim, 1 when inf/nan gradients skipped the update
                           // (the loss scale was halved); undefined without loss scaling
  at::Tensor moe;          // MoE models: global per-layer statistics (see MoeStepStats::packed)
  at::Tensor metrics;      // float64 (M,) on the device: the objective's metrics, global means
  // Host values (each waits for the device).
  double loss_value() const { return loss.item<double>(); }
  std::vector<double> metric_values() const;
  double grad_norm_value() const { return grad_norm.item<double>(); }
  bool skipped_value() const { return skipped.defined() && skipped.item<float>() > 0; }
};

// Returns (inputs, targets), each (B, T) int64, for micro-step m: every target valid.
using MicroBatchFn = std::function<std::pair<torch::Tensor, torch::Tensor>(int64_t m)>;
// Returns micro-step m's batch.
using BatchFn = std::function<Batch(int64_t m)>;

class TrainStepper {
 public:
  // `ep`: expert parallelism (null or inactive: every parameter is averaged over `group`).
  // An enabled `scaler` moves to the device on CUDA when `opt` skips on the device; one the
  // caller already moved (keep_on_device: CPU tests) needs such an optimizer.
  // `fsdp`: ZeRO-3 over several ranks (parallel/fully_shard.h), which then gathers the
  // parameters and reduces the gradients in place of GradSync; one worker.
  TrainStepper(model::GptImpl& model, optim::FlatParams& flat, optim::Optimizer& opt,
               dist::Group& group, const core::Runtime& rt, int workers, uint64_t seed,
               int64_t bucket_bytes, LossScaler scaler = LossScaler(false, 1, 1),
               const ExpertParallel* ep = nullptr, parallel::FullyShard* fsdp = nullptr);

  ~TrainStepper();
  TrainStepper(const TrainStepper&) = delete;
  TrainStepper& operator=(const TrainStepper&) = delete;

  StepResult step(int64_t accum_steps, const BatchFn& next_batch, double lr, double grad_clip);
  StepResult step(int64_t accum_steps, const MicroBatchFn& next_batch, double lr, double grad_clip);
  // Replaces the LM objective (e.g. with distillation).
  void set_objective(std::shared_ptr<Objective> objective) { objective_ = std::move(objective); }
  const Objective& objective() const { return *objective_; }
  // Batches may mask targets: every step then all-reduces the count of valid tokens (without
  // this, each rank's batches must be fully valid and the global count is local * world).
  // Must be set alike on every rank.
  void set_masked_targets(bool on) { masked_targets_ = on; }
  int workers() const { return workers_.count(); }
  // Null under ZeRO-3 (fully_shard()).
  const dist::GradSync* grad_sync() const { return sync_.get(); }
  parallel::FullyShard* fully_shard() const { return fsdp_; }
  // The gradient hooks' accumulators move to the current stream (GradSync): a CUDA graph step
  // calls it on its capture stream before the first step.
  void rebind_grad_hooks_to_current_stream();
  LossScaler& loss_scaler() { return scaler_; }
  // Tensor parallelism (parallel/tensor_parallel_plan.h), for the trainer and the benchmark
  // alike: clipping and the logs use the whole model's gradient norm, this rank's slices summed
  // over the TP group `tp_group` (an optimizer that updates whole matrices, Muon, takes the
  // plan's pieces and norms them itself), and dropout masks are cut as the plan cuts the
  // activations (model/dropout.h); fp16's overflow flag is agreed over `tp_group` too (each TP
  // rank checks its own slices), so all ranks skip a step together. `shard_group`: the ranks a
  // sharded optimizer splits the elements over (under HSDP its shard group, whose replicas hold the
  // same ones). `tp` outlives the stepper.
  void use_tensor_parallel(const parallel::TensorParallel& tp, dist::Group& tp_group,
                           dist::Group& shard_group);

 private:
  // Fills flat.grads() with this rank's share of the gradient (times the loss scale): each
  // batch's objective weighted by valid_tokens * world / global_valid, plus the per-batch terms
  // / micro-steps. Returns float64 (1 + M,) on the device: this rank's sums over valid tokens
  // of the loss and the M metrics; adds MoE statistics to `moe`.
  at::Tensor accumulate_single(const std::vector<Batch>& batches, double global_valid,
                               MoeStepStats& moe);
  at::Tensor accumulate_split(const std::vector<Batch>& batches, double global_valid,
                              MoeStepStats& moe);
  ObjectiveOutput forward_objective(const Batch& batch);
  // The weighted scalar whose gradient a batch contributes (before the loss scale).
  at::Tensor weighted_loss(const ObjectiveOutput& out, int64_t valid_tokens, double global_valid,
                           int64_t accum_steps) const;
  double global_valid_tokens(const std::vector<Batch>& batches) const;
  // Under EP: the expert region's average over the replica group, divided by ep (each EP
  // rank's expert gradient already sums its group's tokens).
  void finish_expert_grads();
  // The averaged gradients into the update: unscaled (fp16), norm, clipping, the update, the
  // loss scale's rules. Fills r.grad_norm and r.skipped.
  void update(StepResult& r, double lr, double grad_clip);
  void clip(const at::Tensor& grad_norm, double grad_clip);
  void install_deferred_table_grad();

  model::GptImpl& model_;
  optim::FlatParams& flat_;
  optim::Optimizer& opt_;
  dist::Group& group_;
  core::Runtime rt_;
  LossScaler scaler_;
  StepWorkers workers_;
  uint64_t seed_;  // dropout masks are seeded from (seed, optimizer step, micro-step, slice)
  std::vector<torch::Tensor> params_;        // in flat segment order
  std::vector<torch::Tensor> worker_grads_;  // workers 1..k-1 (worker 0 writes flat.grads())
  std::unique_ptr<dist::GradSync> sync_;
  parallel::FullyShard* fsdp_ = nullptr;
  const ExpertParallel* ep_ = nullptr;
  std::unique_ptr<dist::GradSync> expert_sync_;  // EP: the expert region, over the replicas
  std::shared_ptr<Objective> objective_;
  bool masked_targets_ = false;
  // Several ranks, a tied token table: its lookup's rows go after backward on their own
  // (parallel/deferred_table_grad.h), so the table's bucket leaves early with the head's part.
  std::unique_ptr<DeferredTableGrad> table_grad_;
  std::function<at::Tensor()> grad_norm_;  // null: the optimizer's
  model::DropoutSplit dropout_split_;      // one part unless tensor-parallel
  dist::Group* tp_group_ = nullptr;        // tensor-parallel: the overflow flag's second group
  at::Tensor grad_norm() { return grad_norm_ ? grad_norm_() : opt_.grad_norm(); }
};

// Worker count from train.workers: a positive value as given; 0 (auto) means one per intra-op
// thread, at most one per row.
int resolve_workers(int64_t configured, int threads, int64_t micro_batch);

}  // namespace lmtrain::train
