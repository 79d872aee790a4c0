// A training run set up, before its first step (run_training = set_up_run + the step loop): its
// data, the model and its expert parallelism, the objective, the flat trained parameters and
// their optimizer, the learning-rate schedule, and where it starts (a resumed checkpoint, or
// initial weights). Each feature enters through its seam (docs/architecture.md): the data
// through TrainingData (prepared windows, a stream, temporal QA rows), the loss through the
// Objective (LM, distillation, temporal alignment), the optimizer through its factory, experts
// through ExpertParallel.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "checkpoint/training_checkpoint.h"
#include "core/runtime.h"
#include "data/bpe_tokenizer.h"
#include "distributed/group.h"
#include "model/gpt.h"
#include "model/lora.h"
#include "objective/objective.h"
#include "optim/flat_params.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "parallel/expert_parallel.h"
#include "parallel/hybrid_shard.h"
#include "parallel/tensor_parallel_plan.h"
#include "train/batch_plan.h"
#include "train/config_snapshot.h"
#include "train/run_options.h"
#include "train/stream_data.h"
#include "train/token_window_data.h"
#include "train/training_data.h"

namespace lmtrain::train {

struct RunSetup {
  RunOptions options;  // what the command read (cli/read_options.h)
  // The same for set-up, with what it found out filled in: the vocabulary, a temporal run's LM
  // shape and its encoder's LM width, the teacher's resolved dir.
  SetupOptions setup;
  // The resolved config as RUN_DIR/config.yaml and each checkpoint's meta.json record it
  // (ConfigSnapshot::yaml() once set-up has told it what it found out). Written, never read.
  std::string config_snapshot;

  std::unique_ptr<TrainingData> data;
  TokenWindowData* windows = nullptr;  // the same, when it is prepared LM data
  StreamData* stream = nullptr;        // the same, when data.source = stream
  const data::BpeTokenizer* tokenizer = nullptr;
  std::string tokenizer_path;

  int64_t max_steps = 0;
  ExpertParallel ep;
  // dist.zero=3: the groups it shards over (HSDP: a shard group and a replica group).
  parallel::ShardGroups shards;
  model::Gpt model{nullptr};
  // dist.tp > 1: the plan that split the model over the TP group (this rank holds its slices).
  std::unique_ptr<parallel::TensorParallel> tp;
  std::shared_ptr<AllToAllExpertDispatcher> dispatcher;  // expert parallelism only
  std::shared_ptr<Objective> objective;                  // what the step optimises
  std::shared_ptr<Objective> val_objective;  // the run's loss without training-only terms
  std::unique_ptr<optim::FlatParams> flat;
  // ZeRO-3's sharded set-up with a LoRA base: where FullyShard reads this rank's pieces of the
  // frozen base, by range (train/init_from_shard.h); empty otherwise.
  std::function<void(const std::string&, int64_t, const at::Tensor&)> frozen_source;
  std::unique_ptr<optim::Optimizer> optimizer;
  optim::LrSchedule schedule;

  // checkpoint.resume resolved once, before the model is built (the sharded set-up reads a
  // resume by range, run_build.cpp): the checkpoint dir, or none (no resume asked for, or
  // resume=auto in a run dir without checkpoints).
  std::optional<std::string> resume_dir;
  TrainingState state;  // step, data position, loss scale, LoRA base, stream positions
  bool resumed = false;
  // Resumed at train.max_steps: that checkpoint (nothing is left to train); empty otherwise.
  std::string complete_checkpoint;
};

// Collective (expert-parallel groups, a resumed optimizer's shards). `snapshot` is told what
// set-up finds out (config_snapshot.h). Throws UsageError naming the key for what a run cannot
// be (e.g. a stream with train.epochs, LoRA without a base).
// Under tensor parallelism `group` is this rank's data-parallel group and `tp` its TP group
// (parallel/tensor_parallel_plan.h); without, `group` is the world and `tp` null.
std::unique_ptr<RunSetup> set_up_run(const RunOptions& options, const SetupOptions& setup,
                                     ConfigSnapshot& snapshot, dist::Group& group,
                                     const core::Runtime& rt, dist::Group* tp = nullptr);

}  // namespace lmtrain::train
