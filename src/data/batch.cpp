#include "data/batch.h"

#include "data/window_stream.h"

namespace lmtrain::data {

std::pair<at::Tensor, at::Tensor> make_batch(const WindowStream& stream,
                                             const std::vector<int64_t>& window_ids,
                                             const c10::Device& device) {
  const int64_t n = static_cast<int64_t>(window_ids.size()), T = stream.seq_len();
  // For a GPU: pinned host memory, so the copy below is asynchronous (one copy of (n, T+1)).
  auto buf =
      torch::empty({n, T + 1}, torch::TensorOptions(torch::kLong).pinned_memory(device.is_cuda()));
  stream.copy_windows(window_ids, buf.data_ptr<int64_t>());
  if (device.is_cuda()) buf = buf.to(device, /*non_blocking=*/true);
  return {buf.narrow(1, 0, T), buf.narrow(1, 1, T)};
}

}  // namespace lmtrain::data
