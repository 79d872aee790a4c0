// A run's options, typed. The command reads them once from the resolved config
// (cli/read_options.cpp) and hands each part down to the module it is for, so the modules below
// the commands take typed options instead of looking keys up in the config themselves.
#pragma once
#include <cstdint>
#include <string>

#include "checkpoint/checkpoint_store.h"
#include "core/config_choice.h"
#include "core/config_schema.h"
#include "distill/distill_options.h"
#include "model/build_model.h"
#include "model/temporal/temporal_options.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer_factory.h"
#include "train/batch_plan.h"
#include "train/data_options.h"

namespace lmtrain::train {

// The option structs' members start at their keys' schema defaults (core/config_schema.h).

// train.cuda_graphs, in the order of its choices (auto, true, false).
enum class CudaGraphsChoice { kAuto, kTrue, kFalse };
constexpr core::ChoiceKey choice_key(CudaGraphsChoice) { return {"train.cuda_graphs", 3}; }

// train.cuda_graphs and its warm-up (train/cuda_graph_step.h).
struct CudaGraphOptions {
  CudaGraphsChoice choice = core::default_choice<CudaGraphsChoice>();
  // Whether the run captures its step: the reader's decision (cli::decide_cuda_graphs), off
  // until it decides (auto is off until a GPU run has proven graphs: kCudaGraphsProvenOnGpu).
  bool enabled = false;
  // auto, off: why (the reader's refusal, or not yet proven); "" otherwise.
  std::string why_off;
  // Eager steps before the capture.
  int64_t warmup = core::default_int("train.cuda_graph_warmup");
};

// When the training loop logs, evaluates, saves and stops.
struct LoopOptions {
  int64_t log_every = core::default_int("log.every");
  bool tensorboard = core::default_bool("log.tensorboard");
  int64_t eval_every = core::default_int("train.eval_every");
  // Micro-batches of every rank.
  int64_t eval_batches = core::default_int("train.eval_batches");
  int64_t checkpoint_every = core::default_int("checkpoint.every");
  bool checkpoint_every_epoch = core::default_bool("checkpoint.every_epoch");
  int keep_last = static_cast<int>(core::default_int("checkpoint.keep_last"));
  // 0 = train.max_steps.
  int64_t stop_at_step = core::default_int("train.stop_at_step");
  // RUN_DIR/report.html kept up to date.
  bool report = core::default_bool("log.report");
};

// What every training-like run steps with: train, bench (and a teacher trained first).
struct RunOptions {
  optim::OptimizerOptions optimizer;  // optim.*, dist.zero
  optim::LrSchedule schedule;         // optim.schedule ...; its length is the run's (over())
  BatchPlan batch;                    // train.*batch_size, data.seq_len at this world size
  uint64_t seed = static_cast<uint64_t>(core::default_int("train.seed"));
  // 0 = cores / local ranks.
  int threads = static_cast<int>(core::default_int("train.threads"));
  int64_t workers = core::default_int("train.workers");       // 0 = auto
  double grad_clip = core::default_float("train.grad_clip");  // 0 = off
  double bucket_mb = core::default_float("dist.bucket_mb");   // gradient buckets' size
  CudaGraphOptions cuda_graphs;
  std::string run_dir = core::default_string("run.dir");
  CheckpointRequest resume;  // checkpoint.resume
  // model.init_from: the weights a fresh run starts from.
  std::string init_from = core::default_string("model.init_from");
  double loss_scale = core::default_float("train.loss_scale");  // fp16's first scale
  int64_t loss_scale_window = core::default_int("train.loss_scale_window");
  double collective_timeout_s = core::default_float("dist.timeout_s");
  LoopOptions loop;  // train only
  // dist.tp: ranks that split each layer (parallel/tensor_parallel_plan.h); `batch` is then
  // planned over world / tp data-parallel ranks.
  int tp = static_cast<int>(core::default_int("dist.tp"));

  int64_t bucket_bytes() const { return static_cast<int64_t>(bucket_mb * (1 << 20)); }
};

// What set_up_run (train/run_setup.h) builds a training run from, beside its RunOptions.
struct SetupOptions {
  // model.*, lora.*, train.activation_checkpointing. vocab_size 0: the tokenizer's, filled in by
  // set-up; a temporal run takes its LM's shape (ConfigSnapshot::adopt_lm_shape).
  model::ModelOptions model;
  // model.temporal.enabled: an encoder aligned to a frozen LM.
  bool temporal = core::default_bool("model.temporal.enabled");
  // model.temporal.*; lm_width and lm_vocab are the LM's, filled in by set-up.
  model::temporal::TemporalEncoderOptions encoder;
  DataOptions data;                                          // data.*
  DistillOptions distill;                                    // distill.*
  int64_t max_steps = core::default_int("train.max_steps");  // 0: train.epochs
  // > 0 (and no max_steps or epochs): steps = ratio * scaling params / tokens per step (nanochat).
  double target_param_data_ratio = core::default_float("train.target_param_data_ratio");
  int64_t epochs = core::default_int("train.epochs");
  int ep = static_cast<int>(core::default_int("dist.ep"));  // expert-parallel group size
};

// `lmtrain bench`: the run's options, its model, and the benchmark's own.
struct BenchOptions {
  RunOptions run;
  model::ModelOptions model;                           // model.vocab_size 0 = 8192 (no tokenizer)
  int64_t warmup = core::default_int("bench.warmup");  // untimed steps
  int64_t steps = core::default_int("bench.steps");    // timed steps
  double peak_tflops = core::default_float("bench.peak_tflops");  // GPU; 0 = measured
};

}  // namespace lmtrain::train
