#include "train/step_interval.h"

#include <algorithm>

namespace lmtrain::train {

void StepInterval::add(double seconds, int64_t tokens, int64_t rows, double comm_s, double a2a_s) {
  seconds_ += seconds;
  tokens_ += tokens;
  rows_ += rows;
  comm_s_ += comm_s;
  a2a_s_ += a2a_s;
  ++steps_;
}

void StepInterval::report(StepMetrics& m, bool samples, bool comm, bool a2a,
                          std::optional<double> loader_wait_total_s) {
  const double seconds = std::max(seconds_, 1e-9);
  const double steps = static_cast<double>(std::max<int64_t>(steps_, 1));
  m.tokens_per_s = static_cast<double>(tokens_) / seconds;
  if (samples) m.samples_per_s = static_cast<double>(rows_) / seconds;
  m.comm_wait_ms = comm ? 1e3 * comm_s_ / steps : -1;
  const auto sent_now = dist::comm_bytes_so_far();
  if (comm) {
    m.comm_bytes = (sent_now - comm_bytes_at_start_).divided_by(steps_);
  }
  comm_bytes_at_start_ = sent_now;
  m.a2a_ms = a2a ? 1e3 * a2a_s_ / steps : -1;
  if (loader_wait_total_s) {
    m.data_wait_ms = 1e3 * (*loader_wait_total_s - loader_wait_at_start_s_) / steps;
    loader_wait_at_start_s_ = *loader_wait_total_s;
  }
  seconds_ = comm_s_ = a2a_s_ = 0;
  tokens_ = rows_ = steps_ = 0;
}

}  // namespace lmtrain::train
