#include "train/loader_benchmark.h"

#include <chrono>

#include "core/error.h"
#include "train/stream_data.h"

namespace lmtrain::train {

LoaderBenchResult run_loader_benchmark(const DataOptions& data, uint64_t seed,
                                       const BatchPlan& plan, int64_t steps) {
  if (data.source != DataSource::kStream) {
    throw UsageError(
        "lmtrain bench --loader times a streaming loader: set data.source = stream and "
        "data.stream.inputs (a prepared corpus is memory-mapped, there is nothing to time)");
  }
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  StreamData stream(data, seed, /*rank=*/0, /*world=*/1);
  stream.start(stream.fresh_position(), plan.micro_batch, /*max_val_windows=*/0);
  const std::vector<int64_t> rows(static_cast<size_t>(plan.micro_batch));
  const c10::Device cpu(c10::kCPU);
  LoaderBenchResult r;
  // Timed from the start, opening included: the queue runs ahead from the first moment, so a
  // timer started later would count batches made before it.
  r.batches = steps * plan.accum_steps;
  for (int64_t b = 0; b < r.batches; ++b) {
    stream.train_batch(0, rows, cpu);
    if (b == 0) r.first_batch_s = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.tokens = r.batches * plan.micro_batch * plan.seq_len;
  r.tokens_per_s = r.tokens / std::max(r.seconds, 1e-9);
  r.tokenizer_threads = data.stream.tokenizer_threads;
  return r;
}

}  // namespace lmtrain::train
