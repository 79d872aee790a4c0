// The parts of run_training (train/trainer.h) beside its step loop: ZeRO-3's sharding of the
// set-up model (trainer_zero3.cpp), the checkpoint saves (trainer_save.cpp) and the loop's log
// lines (trainer_logs.cpp).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_store.h"
#include "checkpoint/sharded_save.h"
#include "core/runtime.h"
#include "distributed/group.h"
#include "observe/metrics_logger.h"
#include "parallel/fully_shard.h"
#include "train/run_setup.h"
#include "train/train_step.h"
#include "train/trainer.h"

namespace lmtrain::train {

// ---- ZeRO-3 (trainer_zero3.cpp)

// ZeRO-3 (dist.zero=3) over more than one rank: the parameters sharded, the hooks installed,
// and this rank's model state logged by kind. Null otherwise (one rank: ZeRO-2's path).
std::unique_ptr<parallel::FullyShard> make_fully_shard(RunSetup& s, dist::Group& world,
                                                       const core::Runtime& rt);

// The run's gathered peaks, after the loop.
void log_shard_peaks(const parallel::FullyShard& fsdp);

// While alive, a ZeRO-3 model runs forward only, block by block (evaluation): it is never whole
// on any rank.
class ShardedForward {
 public:
  explicit ShardedForward(parallel::FullyShard* fsdp) : fsdp_(fsdp) {
    if (fsdp_) fsdp_->begin_forward_only();
  }
  ~ShardedForward() {
    if (fsdp_) fsdp_->end_forward_only();
  }
  ShardedForward(const ShardedForward&) = delete;
  ShardedForward& operator=(const ShardedForward&) = delete;

 private:
  parallel::FullyShard* fsdp_;
};

// ---- checkpoints (trainer_save.cpp)

// Saves the run's checkpoints. Collective: every rank calls save() at the same step. ZeRO-3
// over several ranks, tensor and expert parallelism save shards, never the gathered model
// (checkpoint/sharded_save.h): each rank holding a distinct part writes it; a sharded optimizer
// alone has each rank write its optimizer shard; rank 0 publishes the checkpoint.
class RunSaver {
 public:
  // `world`: every rank of the job; `dp`: the data-parallel group (the world without TP).
  RunSaver(RunSetup& s, dist::Group& world, dist::Group& dp, const parallel::FullyShard* fsdp,
           CheckpointStore& store, std::string tokenizer_json);
  // Saves s.state (its step, data position and, from `scaler`, an fp16 run's loss scale).
  // Returns the checkpoint's dir on rank 0, "" on the other ranks.
  std::string save(const LossScaler& scaler, std::optional<double> val_loss, double train_loss,
                   std::optional<int64_t> ended_epoch);

 private:
  RunSetup& s_;
  dist::Group& world_;
  dist::Group& dp_;
  CheckpointStore& store_;
  std::string tokenizer_json_;
  std::optional<ShardedSave> shards_;
};

// ---- the loop's log lines (trainer_logs.cpp)

// The run's start: the step workers, the gradient buckets of a multi-rank run, an fp16 run's
// loss scale and whether CUDA graphs are on (under auto, why not).
void log_loop_start(TrainStepper& stepper, const RunOptions& options, int workers,
                    const dist::Group& group, const core::Runtime& rt);
// This rank's model state by kind: the trained parameters and their gradients (whole, or
// ZeRO-3's shards) and the optimizer's state.
void log_model_state(const RunSetup& s, int64_t params, int64_t grads);
// Frozen parameters (a LoRA base) held by this rank: whole, or ZeRO-3's pieces of them.
void log_frozen_state(int64_t held, int64_t whole);
// Block index of each MoE layer, for the metrics.
std::vector<int64_t> moe_layer_indices(const model::GptConfig& mcfg);
// One log line's record (metrics.jsonl, TensorBoard, the progress line) of the step just taken.
StepMetrics step_metrics(const TrainingState& state, double loss, const StepResult& r,
                         const std::vector<std::string>& metric_names, double lr,
                         TrainStepper& stepper, const core::Runtime& rt, double train_seconds,
                         const std::vector<int64_t>& moe_layers);
// The run's last lines: a run cut short by a signal says so (not "done": the exit code, 128 +
// signal, and this line tell a scheduler), a stream run how long the steps waited for tokens.
void log_loop_end(const TrainResult& result, const TrainingState& state, int64_t max_steps,
                  const StreamData* stream, int64_t queue_batches, double train_seconds);

}  // namespace lmtrain::train
