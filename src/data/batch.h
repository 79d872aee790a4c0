// Turns window ids into (inputs, targets) tensors.
#pragma once
#include <ATen/core/Tensor.h>

#include <utility>
#include <vector>

namespace lmtrain::data {

class WindowStream;

// Returns (inputs, targets), each (n, T) int64, targets shifted by one token.
std::pair<at::Tensor, at::Tensor> make_batch(const WindowStream& stream,
                                             const std::vector<int64_t>& window_ids);

}  // namespace lmtrain::data
