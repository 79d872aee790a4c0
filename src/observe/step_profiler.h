// LMTRAIN_PROFILE=FILE for `lmtrain bench`: libtorch's Kineto profiler (what torch.profiler runs
// in Python) over the timed steps. It records the CPU ops and, on CUDA, every GPU kernel with its
// device time; writes a chrome://tracing / Perfetto trace to FILE; and logs the ops and kernels
// that took the most time per step, so a run on a GPU machine says where its step goes without
// a trace viewer (scripts/device_check.sh keeps those tables).
#pragma once
#include <cstdint>
#include <string>

namespace lmtrain::train {

class StepProfiler {
 public:
  // Starts recording when `path` is not empty (else does nothing); `cuda` adds GPU kernels.
  StepProfiler(std::string path, bool cuda);
  ~StepProfiler();  // stops without a report if finish() was not called
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;

  // Stops, saves the trace and logs the `top` largest entries per device (time per step over
  // `steps` recorded steps). Safe to call when not recording.
  void finish(int64_t steps, int top = 15);
  bool recording() const { return recording_; }

 private:
  std::string path_;
  bool recording_ = false;
};

}  // namespace lmtrain::train
