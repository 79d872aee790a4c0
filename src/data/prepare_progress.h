// Progress of `lmtrain prepare`, phase by phase, through a callback: by default a log line
// every few seconds ("prepare encode: 1.21 / 40.00 GB (3.0%), 45.2 MB/s, 1234567 documents,
// ETA 14m20s"); a progress bar plugs in by passing its own function.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace lmtrain::data {

struct PrepareProgress {
  std::string phase;            // "hash", "sample" (the tokenizer's), "encode"
  uint64_t bytes_done = 0;      // input bytes (on disk) of this phase done, earlier runs included
  uint64_t bytes_total = 0;     // input bytes (on disk) the phase reads in all
  uint64_t documents = 0;       // documents read in this phase, earlier runs included
  double seconds = 0;           // since the phase began in this run
  double bytes_per_second = 0;  // over this run's part of the phase
  double eta_seconds = -1;      // < 0: unknown
  bool finished = false;        // the phase's last report
};

using PrepareProgressFn = std::function<void(const PrepareProgress&)>;

// The default: one log::info line per report.
void log_prepare_progress(const PrepareProgress& p);

// Rate-limits reports of one phase: update() calls `fn` at most once per `every_seconds`,
// finish() always once.
class ProgressMeter {
 public:
  ProgressMeter(PrepareProgressFn fn, std::string phase, uint64_t bytes_total, double every_seconds,
                uint64_t bytes_start = 0, uint64_t documents_start = 0);
  void update(uint64_t bytes_done, uint64_t documents);
  void finish(uint64_t bytes_done, uint64_t documents);

 private:
  void report(uint64_t bytes_done, uint64_t documents, bool finished);
  using Clock = std::chrono::steady_clock;
  PrepareProgressFn fn_;
  PrepareProgress p_;
  double every_;
  uint64_t bytes_start_;
  Clock::time_point t0_, last_;
};

}  // namespace lmtrain::data
