// A run's options, typed. The command reads them once from the resolved config
// (cli/read_options.cpp) and hands each part down to the module it is for, so the modules below
// the commands take typed options instead of looking keys up in the config themselves.
#pragma once
#include <cstdint>
#include <string>

#include "checkpoint/checkpoint_store.h"
#include "distill/distill_options.h"
#include "model/build_model.h"
#include "model/temporal/temporal_options.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer_factory.h"
#include "train/batch_plan.h"
#include "train/data_options.h"

namespace lmtrain::train {

// train.cuda_graphs and its warm-up (train/cuda_graph_step.h).
struct CudaGraphOptions {
  bool enabled = false;
  int64_t warmup = 0;  // eager steps before the capture
};

// When the training loop logs, evaluates, saves and stops.
struct LoopOptions {
  int64_t log_every = 0;                // log.every
  bool tensorboard = false;             // log.tensorboard
  int64_t eval_every = 0;               // train.eval_every
  int64_t eval_batches = 0;             // train.eval_batches (micro-batches of every rank)
  int64_t checkpoint_every = 0;         // checkpoint.every
  bool checkpoint_every_epoch = false;  // checkpoint.every_epoch
  int keep_last = 0;                    // checkpoint.keep_last
  int64_t stop_at_step = 0;             // train.stop_at_step (0 = train.max_steps)
  bool report = false;                  // log.report: RUN_DIR/report.html kept up to date
};

// What every training-like run steps with: train, bench (and a teacher trained first).
struct RunOptions {
  optim::OptimizerOptions optimizer;  // optim.*, dist.zero
  optim::LrSchedule schedule;         // optim.schedule ...; its length is the run's (over())
  BatchPlan batch;                    // train.*batch_size, data.seq_len at this world size
  uint64_t seed = 0;                  // train.seed
  int threads = 0;                    // train.threads (0 = cores / local ranks)
  int64_t workers = 0;                // train.workers (0 = auto)
  double grad_clip = 0;               // train.grad_clip (0 = off)
  double bucket_mb = 0;               // dist.bucket_mb: gradient buckets' size
  CudaGraphOptions cuda_graphs;
  std::string run_dir;              // run.dir
  CheckpointRequest resume;         // checkpoint.resume
  std::string init_from;            // model.init_from: the weights a fresh run starts from
  double loss_scale = 0;            // train.loss_scale: fp16's first scale
  int64_t loss_scale_window = 0;    // train.loss_scale_window
  double collective_timeout_s = 0;  // dist.timeout_s
  LoopOptions loop;                 // train only

  int64_t bucket_bytes() const { return static_cast<int64_t>(bucket_mb * (1 << 20)); }
};

// What set_up_run (train/run_setup.h) builds a training run from, beside its RunOptions.
struct SetupOptions {
  // model.*, lora.*, train.activation_checkpointing. vocab_size 0: the tokenizer's, filled in by
  // set-up; a temporal run takes its LM's shape (ConfigSnapshot::adopt_lm_shape).
  model::ModelOptions model;
  bool temporal = false;  // model.temporal.enabled: an encoder aligned to a frozen LM
  // model.temporal.*; lm_width and lm_vocab are the LM's, filled in by set-up.
  model::temporal::TemporalEncoderOptions encoder;
  DataOptions data;        // data.*
  DistillOptions distill;  // distill.*
  int64_t max_steps = 0;   // train.max_steps (0: train.epochs)
  int64_t epochs = 0;      // train.epochs
  int ep = 1;              // dist.ep: expert-parallel group size
};

// `lmtrain bench`: the run's options, its model, and the benchmark's own.
struct BenchOptions {
  RunOptions run;
  model::ModelOptions model;  // model.vocab_size 0 = 8192 (no tokenizer)
  int64_t warmup = 0;         // bench.warmup: untimed steps
  int64_t steps = 0;          // bench.steps: timed steps
  double peak_tflops = 0;     // bench.peak_tflops (GPU; 0 = measured)
};

}  // namespace lmtrain::train
