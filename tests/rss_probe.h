// Resident memory of this process, for the tests that bound a phase's memory on the CPU (where
// host memory is the device's): the peak (VmHWM) is reset to the current RSS through
// /proc/self/clear_refs, the phase runs, and the peak is read back.
#pragma once
#include <malloc.h>

#include <cstdint>
#include <fstream>
#include <string>

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

}  // namespace lmtrain::testing
