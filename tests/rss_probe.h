// Resident memory of this process, for the tests that bound a phase's memory on the CPU (where
// host memory is the device's): the peak (VmHWM) is reset to the current RSS through
// /proc/self/clear_refs, the phase runs, and the peak is read back.
#pragma once
#include <gtest/gtest.h>
#include <malloc.h>
#include <torch/torch.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "distributed/group.h"
#include "e2e/dist_harness.h"

namespace lmtrain::testing {

// kB of a /proc/self/status field ("VmRSS", "VmHWM"), -1 if absent.
inline int64_t proc_status_kb(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, field.size() + 1, field + ":") == 0) {
      return std::stoll(line.substr(field.size() + 1));
    }
  }
  return -1;
}

// Resets the process's peak RSS to its current RSS (Linux >= 4.0); false where it cannot.
inline bool reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

// While alive, host-allocator noise stays out of the figures: blocks above 64 KiB are mapped and
// unmapped at once (no dynamic threshold, no cached free heap), so RSS follows the live tensors.
// glibc's static defaults again afterwards, for the later tests in the process.
struct MallocFollowsTensors {
  MallocFollowsTensors() {
    mallopt(M_MMAP_THRESHOLD, 64 * 1024);
    mallopt(M_TRIM_THRESHOLD, 64 * 1024);
  }
  ~MallocFollowsTensors() {
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    mallopt(M_TRIM_THRESHOLD, 128 * 1024);
  }
  MallocFollowsTensors(const MallocFollowsTensors&) = delete;
  MallocFollowsTensors& operator=(const MallocFollowsTensors&) = delete;
};

// Peak RSS growth (MiB) of a set-up run on `world` in-process ranks (real Gloo groups). Each
// rank's body calls mark_peak() with its set-up held (every rank reaches it, so the ranks' peaks
// coincide; what the body does afterwards is not measured) and returns the bytes it may hold;
// grown_mib stays -1 where the peak cannot be measured.
using MarkPeak = std::function<void()>;
struct MeasuredSetUp {
  double grown_mib = -1, allowed_mib = 0;
  std::vector<std::string> errors;
};
inline MeasuredSetUp measure_ranks_setup(
    int world, const std::function<int64_t(int, dist::Group&, const MarkPeak&)>& setup) {
  MeasuredSetUp out;
  std::vector<int64_t> allowed(world, 0);
  int64_t base_kb = -1, peak_kb = -1;
  bool reset_ok = true;
  out.errors = run_ranks_in_process(world, [&](int r, dist::Group& group) {
    auto sync = [&] {
      auto t = torch::zeros({1});
      group.allreduce(t, dist::ReduceOp::kSum)->wait();
    };
    sync();
    if (r == 0) {
      reset_ok = reset_peak_rss();
      base_kb = proc_status_kb("VmRSS");
    }
    sync();
    allowed[r] = setup(r, group, [&] {
      sync();
      if (r == 0) peak_kb = proc_status_kb("VmHWM");
      sync();
    });
  });
  if (reset_ok && base_kb >= 0 && peak_kb >= 0) {
    out.grown_mib = (peak_kb - base_kb) / 1024.0;
    for (int64_t a : allowed) out.allowed_mib += a / 1048576.0;
  }
  return out;
}

// The check of a set-up memory test: skipped where the peak cannot be measured; otherwise prints
// `what` with the figures, and expects the set-up under test below what its ranks may hold plus
// 24 MiB (threads, Gloo, small tensors) and the whole build above that bound, so that the bound
// tells the two apart.
inline void expect_set_up_within_bound(const MeasuredSetUp& tested, const MeasuredSetUp& whole,
                                       const std::string& what) {
  if (tested.grown_mib < 0) {
    GTEST_SKIP() << "no /proc/self/clear_refs or VmHWM here: peak RSS cannot be measured";
  }
  const double bound = tested.allowed_mib + 24;
  std::printf("%s: peak RSS +%.1f MiB (bound %.1f MiB); whole build +%.1f MiB\n", what.c_str(),
              tested.grown_mib, bound, whole.grown_mib);
  EXPECT_LT(tested.grown_mib, bound) << what;
  EXPECT_GT(whole.grown_mib, bound) << what;
}

}  // namespace lmtrain::testing
