// `lmtrain bench --loader`: how fast the streaming loader of a config (data.source = stream)
// makes micro-batches when nothing else runs, the figure to hold against the trainer's
// tokens/s: a loader slower than training is the bottleneck (the step log's data wait says how
// much).
#pragma once
#include <cstdint>

#include "train/batch_plan.h"
#include "train/data_options.h"

namespace lmtrain::train {

struct LoaderBenchResult {
  int64_t batches = 0;       // micro-batches: (bench.warmup + bench.steps) x accumulation steps
  int64_t tokens = 0;        // their tokens (B x T each)
  double seconds = 0;        // wall time from opening the inputs to the last batch
  double tokens_per_s = 0;   // tokens / seconds: what the loader sustains
  double first_batch_s = 0;  // start to the first batch (opening files, the first chunk)
  int tokenizer_threads = 1;
};

// One process, rank 0 of 1: the training units of the whole corpus, in the run's order (seed:
// train.seed), in micro-batches of `plan` (the config's at world size 1), for `steps` optimizer
// steps (bench.warmup + bench.steps).
LoaderBenchResult run_loader_benchmark(const DataOptions& data, uint64_t seed,
                                       const BatchPlan& plan, int64_t steps);

}  // namespace lmtrain::train
