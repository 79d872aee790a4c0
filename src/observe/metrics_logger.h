// Rank 0's record of a run: metrics.jsonl (one JSON object per logged step; eval records carry
// val_loss), TensorBoard scalars with the same values, and the human progress line.
#pragma once
#include <chrono>
#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "distributed/comm_bytes.h"
#include "observe/moe_step_stats.h"

namespace lmtrain::train {

class TfEventsWriter;

struct StepMetrics {
  int64_t step = 0;  // completed optimizer steps
  int64_t epoch = 0;
  double loss = 0;
  // The objective's terms beside the loss, e.g. {"kd", ...}, {"ce", ...} for distillation.
  std::vector<std::pair<std::string, double>> terms;
  double lr = 0;
  double grad_norm = 0;
  double tokens_per_s = 0;
  double samples_per_s = 0;  // runs of samples (temporal QA rows), else 0: not logged
  double elapsed_s = 0;
  double comm_wait_ms = -1;    // per step, gradient all-reduce not hidden by backward (<0: n/a)
  double data_wait_ms = -1;    // per step, waiting for a streaming loader's tokens (<0: n/a)
  double loss_scale = 0;       // fp16 dynamic loss scale (0: not in use)
  int64_t skipped_steps = 0;   // fp16 steps skipped for inf/nan gradients, whole run
  int64_t peak_mem_bytes = 0;  // GPU: peak bytes allocated since start (0: CPU)
  std::vector<MoeLayerMetrics> moe;  // MoE models: per MoE layer, of the logged step
  double a2a_ms = -1;                // expert parallelism: per step, blocked in token exchanges
  // Distributed runs: bytes this rank sent per step in collectives, by kind (distributed/
  // comm_bytes.h); unset in a world of one.
  std::optional<dist::CommBytes> comm_bytes;
};

class MetricsLogger {
 public:
  // enabled=false (ranks > 0) makes every call a no-op.
  MetricsLogger(const std::string& run_dir, bool enabled, bool tensorboard, int64_t max_steps);
  ~MetricsLogger();

  void log_step(const StepMetrics& m);
  void log_eval(int64_t step, double val_loss);

 private:
  bool enabled_;
  int64_t max_steps_;
  std::ofstream jsonl_;
  std::unique_ptr<TfEventsWriter> tb_;
};

// "1h02m", "3m05s", "42s"
std::string format_duration(double seconds);

}  // namespace lmtrain::train
