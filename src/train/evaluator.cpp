#include "train/evaluator.h"

#include "data/batch.h"
#include "data/window_stream.h"

namespace lmtrain::train {

double evaluate(model::GptImpl& model, data::WindowStream& split, int64_t micro_batch,
                int64_t batches, dist::Group& group) {
  const bool was_training = model.is_training();
  model.eval();
  torch::NoGradGuard no_grad;
  const int64_t W = group.size(), r = group.rank(), n = split.num_windows();
  double sum = 0;
  for (int64_t b = 0; b < batches; ++b) {
    std::vector<int64_t> ids(micro_batch);
    // Wrap around small val splits so every rank evaluates the same number of windows.
    for (int64_t j = 0; j < micro_batch; ++j) ids[j] = (b * micro_batch * W + j * W + r) % n;
    auto [x, y] = data::make_batch(split, ids);
    sum += model.loss(x, y).item<double>();
  }
  auto t = torch::tensor({sum / batches}, torch::kFloat64);
  group.allreduce(t, dist::ReduceOp::kAvg)->wait();
  if (was_training) model.train();
  return t.item<double>();
}

}  // namespace lmtrain::train
