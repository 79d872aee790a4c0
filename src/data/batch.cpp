#include "data/batch.h"

#include <torch/torch.h>

#include <cstring>

#include "data/window_stream.h"

namespace lmtrain::data {
namespace {

// (n, T+1) int64 on the host, pinned for a GPU so that the copy below is asynchronous.
at::Tensor host_rows(int64_t n, int64_t T, const c10::Device& device) {
  return torch::empty({n, T + 1},
                      torch::TensorOptions(torch::kLong).pinned_memory(device.is_cuda()));
}

std::pair<at::Tensor, at::Tensor> split_rows(at::Tensor buf, int64_t T, const c10::Device& device) {
  if (device.is_cuda()) buf = buf.to(device, /*non_blocking=*/true);
  return {buf.narrow(1, 0, T), buf.narrow(1, 1, T)};
}

}  // namespace

std::pair<at::Tensor, at::Tensor> make_batch(const WindowStream& stream,
                                             const std::vector<int64_t>& window_ids,
                                             const c10::Device& device) {
  const int64_t n = static_cast<int64_t>(window_ids.size()), T = stream.seq_len();
  auto buf = host_rows(n, T, device);
  stream.copy_windows(window_ids, buf.data_ptr<int64_t>());
  return split_rows(std::move(buf), T, device);
}

std::pair<at::Tensor, at::Tensor> make_batch_from_rows(const int64_t* rows, int64_t n, int64_t T,
                                                       const c10::Device& device) {
  auto buf = host_rows(n, T, device);
  std::memcpy(buf.data_ptr<int64_t>(), rows, static_cast<size_t>(n * (T + 1)) * sizeof(int64_t));
  return split_rows(std::move(buf), T, device);
}

}  // namespace lmtrain::data
