// The edge where the string-keyed config ends for `train` and `bench`: the resolved config read
// once into typed options (train/run_options.h), each part then handed to its module.
#pragma once
#include "cli/read_cuda_graphs.h"
#include "core/config.h"
#include "core/runtime.h"
#include "train/cuda_graph_step.h"
#include "train/run_options.h"

namespace lmtrain::cli {

// optim.* and dist.zero.
optim::OptimizerOptions read_optimizer_options(const core::Config& cfg);
// optim.schedule and its keys, over one step until the run knows its length (LrSchedule::over).
optim::LrSchedule read_lr_schedule(const core::Config& cfg);

// train.micro_batch_size, data.seq_len, train.total_batch_size and train.grad_accum_steps at
// `world_size` ranks (BatchPlan::make's refusals name them).
train::BatchPlan read_batch_plan(const core::Config& cfg, int world_size);

// The run's options at `world_size` ranks on `rt`. Throws UsageError naming the key for what
// the run cannot be: a batch that does not split, LoRA with Muon or expert parallelism, a
// temporal run that distils, and (train.cuda_graphs) what a captured step cannot replay, before
// anything is written.
train::RunOptions read_run_options(const core::Config& cfg, int world_size,
                                   const core::Runtime& rt);

// data.* (data.source, the prepared dir, a stream's inputs, time-series samples).
train::DataOptions read_data_options(const core::Config& cfg);
// distill.*.
train::DistillOptions read_distill_options(const core::Config& cfg);
// What set_up_run builds a training run from: the model (its vocabulary left to the tokenizer
// when model.vocab_size is 0), the temporal encoder, data, distillation, the run's length and
// expert parallelism. Throws UsageError naming the key for an inconsistent model shape.
train::SetupOptions read_setup_options(const core::Config& cfg);

// `lmtrain bench`'s options: the run's, its model (model.vocab_size 0 = 8192: random tokens
// need no tokenizer) and bench.*.
train::BenchOptions read_bench_options(const core::Config& cfg, int world_size,
                                       const core::Runtime& rt);

}  // namespace lmtrain::cli
