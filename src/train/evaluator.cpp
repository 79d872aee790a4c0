#include "train/evaluator.h"

#include "core/progress.h"
#include "data/batch.h"
#include "data/window_stream.h"

namespace lmtrain::train {

double evaluate(model::GptImpl& model, data::WindowStream& split, int64_t micro_batch,
                int64_t batches, dist::Group& group, const core::Runtime& rt,
                core::Progress* progress) {
  const bool was_training = model.is_training();
  model.eval();
  torch::NoGradGuard no_grad;
  const int64_t W = group.size(), r = group.rank(), n = split.num_windows();
  auto sum = torch::zeros({1}, torch::TensorOptions(torch::kFloat64).device(rt.device));
  for (int64_t b = 0; b < batches; ++b) {
    std::vector<int64_t> ids(micro_batch);
    // Wrap around small val splits so every rank evaluates the same number of windows.
    for (int64_t j = 0; j < micro_batch; ++j) ids[j] = (b * micro_batch * W + j * W + r) % n;
    auto [x, y] = data::make_batch(split, ids, rt.device);
    core::AutocastScope autocast(rt);
    sum += model.loss(x, y).to(torch::kFloat64);
    if (progress) progress->add(1);
  }
  sum /= static_cast<double>(batches);
  group.allreduce(sum, dist::ReduceOp::kAvg)->wait();
  if (was_training) model.train();
  return sum.item<double>();
}

}  // namespace lmtrain::train
