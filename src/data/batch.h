// Turns window ids into (inputs, targets) tensors.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <utility>
#include <vector>

namespace lmtrain::data {

class WindowStream;

// Returns (inputs, targets), each (n, T) int64 on `device`, targets shifted by one token. For a
// GPU the windows are staged in pinned host memory and copied without blocking the host, so the
// copy queues behind the running step instead of waiting for it.
std::pair<at::Tensor, at::Tensor> make_batch(const WindowStream& stream,
                                             const std::vector<int64_t>& window_ids,
                                             const c10::Device& device = c10::Device(c10::kCPU));

// The same from rows already in memory: `rows` is (n, T+1) int64, row-major (a streamed batch).
std::pair<at::Tensor, at::Tensor> make_batch_from_rows(const int64_t* rows, int64_t n, int64_t T,
                                                       const c10::Device& device);

}  // namespace lmtrain::data
