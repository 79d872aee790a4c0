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

}  // namespace lmtrain::data
