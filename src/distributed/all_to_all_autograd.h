// An all-to-all that autograd differentiates: the exchange expert parallelism uses to send
// tokens to the ranks holding their experts and back. Backward is the reverse exchange: the
// gradient of the rows this rank received goes back to the ranks that sent them.
#pragma once
#include <ATen/core/Tensor.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

#include "distributed/group.h"

namespace lmtrain::dist {

// Wall time spent blocked in exchanges (forward and backward), for the metrics.
struct CommTimer {
  std::atomic<int64_t> nanos{0};
  // Seconds accumulated since the last call.
  double take_seconds() { return static_cast<double>(nanos.exchange(0)) * 1e-9; }
  // Adds the time since `start`.
  void add_since(std::chrono::steady_clock::time_point start) {
    nanos += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                                  start)
                 .count();
  }
};

// input (sum(input_splits), ...): rows [sum(input_splits[<r]), +input_splits[r]) go to rank r.
// Returns (sum(output_splits), ...): rows from rank s at [sum(output_splits[<s]), ...).
// Split sizes may differ per rank and be zero; each rank passes its own. Blocks until the
// exchange is done (forward and backward).
// `timer` (optional) accumulates the time of this exchange and of its backward.
at::Tensor all_to_all_autograd(Group& group, const at::Tensor& input,
                               const std::vector<int64_t>& output_splits,
                               const std::vector<int64_t>& input_splits,
                               CommTimer* timer = nullptr);

}  // namespace lmtrain::dist
