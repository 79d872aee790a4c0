// What the steps between two log lines add up to (their wall time, tokens, rows, gradient-sync
// wait, all-to-all time and the streaming loader's wait), turned into a log line's rates and
// per-step means, then started afresh.
#pragma once
#include <cstdint>
#include <optional>

#include "distributed/comm_bytes.h"
#include "observe/metrics_logger.h"

namespace lmtrain::train {

class StepInterval {
 public:
  // One step: its wall time, tokens and rows (samples) of all ranks, and the seconds it waited
  // for the gradient all-reduce and the expert all-to-all.
  void add(double seconds, int64_t tokens, int64_t rows, double comm_s, double a2a_s);

  // Fills m.tokens_per_s and, where asked, m.samples_per_s, m.comm_wait_ms, m.a2a_ms and
  // m.data_wait_ms (from the loader's running total of waited seconds), with `comm` also
  // m.comm_bytes (this rank's collectives since the last report, per step), then starts a new
  // interval.
  void report(StepMetrics& m, bool samples, bool comm, bool a2a,
              std::optional<double> loader_wait_total_s);

 private:
  double seconds_ = 0, comm_s_ = 0, a2a_s_ = 0;
  int64_t tokens_ = 0, rows_ = 0, steps_ = 0;
  double loader_wait_at_start_s_ = 0;
  dist::CommBytes comm_bytes_at_start_ = dist::comm_bytes_so_far();
};

}  // namespace lmtrain::train
