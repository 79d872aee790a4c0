#include "data/batch.h"

#include "data/window_stream.h"

namespace lmtrain::data {

std::pair<at::Tensor, at::Tensor> make_batch(const WindowStream& stream,
                                             const std::vector<int64_t>& window_ids) {
  const int64_t n = static_cast<int64_t>(window_ids.size()), T = stream.seq_len();
  auto buf = torch::empty({n, T + 1}, torch::kLong);  // (n, T+1)
  stream.copy_windows(window_ids, buf.data_ptr<int64_t>());
  return {buf.narrow(1, 0, T), buf.narrow(1, 1, T)};
}

}  // namespace lmtrain::data
