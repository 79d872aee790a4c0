#include "observe/step_profiler.h"

#include <torch/csrc/autograd/profiler_kineto.h>

#include <algorithm>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/log.h"

namespace lmtrain::train {
namespace {

namespace prof = torch::profiler::impl;

struct Total {
  uint64_t ns = 0;
  int64_t calls = 0;
};

// The `top` largest totals of one device type, as log lines. GPU kernels do not nest, so their
// shares of the GPU's busy time are given; CPU ops nest (aten::linear holds aten::addmm), so
// their times are inclusive and only the times are given.
void log_top(const std::map<std::string, Total>& totals, bool nested, const char* what,
             int64_t steps, int top) {
  std::vector<std::pair<std::string, Total>> rows(totals.begin(), totals.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
  uint64_t all = 0;
  for (const auto& r : rows) all += r.second.ns;
  log::info(nested ? log::format("profile: %s, top %d of %zu by inclusive time per step", what, top,
                                 rows.size())
                   : log::format("profile: %s, top %d of %zu by time per step (%.3f ms busy)", what,
                                 top, rows.size(), all / 1e6 / steps));
  for (int i = 0; i < top && i < static_cast<int>(rows.size()); ++i) {
    const auto& [name, t] = rows[i];
    const std::string share = nested ? "" : log::format(" %5.1f%%", 100.0 * t.ns / all);
    log::info(log::format("profile: %9.3f ms%s %7.1f calls  %s", t.ns / 1e6 / steps, share.c_str(),
                          static_cast<double>(t.calls) / steps, name.substr(0, 110).c_str()));
  }
}

}  // namespace

StepProfiler::StepProfiler(std::string path, bool cuda) : path_(std::move(path)) {
  if (path_.empty()) return;
  std::set<prof::ActivityType> activities{prof::ActivityType::CPU};
  if (cuda) activities.insert(prof::ActivityType::CUDA);
  try {
    torch::autograd::profiler::prepareProfiler(prof::ProfilerConfig(prof::ProfilerState::KINETO),
                                               activities);
    torch::autograd::profiler::enableProfiler(prof::ProfilerConfig(prof::ProfilerState::KINETO),
                                              activities);
  } catch (const std::exception& e) {
    throw Error(std::string("LMTRAIN_PROFILE: starting libtorch's profiler failed: ") + e.what());
  }
  recording_ = true;
}

StepProfiler::~StepProfiler() {
  if (!recording_) return;
  try {
    torch::autograd::profiler::disableProfiler();
  } catch (...) {  // a destructor does not throw; the run already failed
  }
}

void StepProfiler::finish(int64_t steps, int top) {
  if (!recording_) return;
  recording_ = false;
  auto result = torch::autograd::profiler::disableProfiler();
  std::map<std::string, Total> cpu, gpu;
  for (const auto& e : result->events()) {
    auto& totals = e.deviceType() == c10::DeviceType::CUDA ? gpu : cpu;
    auto& t = totals[e.name()];
    t.ns += e.durationNs();
    ++t.calls;
  }
  result->save(path_);
  log::info("profile: trace of " + std::to_string(steps) + " step(s) written to " + path_ +
            " (chrome://tracing or ui.perfetto.dev)");
  steps = std::max<int64_t>(1, steps);
  if (!gpu.empty()) log_top(gpu, false, "GPU kernels and copies", steps, top);
  // With split-batch workers (CPU) these are the calling thread's ops: worker 0's share.
  log_top(cpu, true, "CPU ops", steps, top);
}

}  // namespace lmtrain::train
