#include "train/evaluator.h"

#include "core/progress.h"
#include "data/batch.h"
#include "data/window_stream.h"
#include "objective/objective.h"
#include "train/training_data.h"

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

double evaluate(model::GptImpl& model, Objective& objective, TrainingData& data,
                int64_t micro_batch, int64_t batches, dist::Group& group, const core::Runtime& rt) {
  const bool was_training = model.is_training();
  model.eval();
  torch::NoGradGuard no_grad;
  const int64_t W = group.size(), r = group.rank(), n = data.val_samples();
  // [sum of loss * valid tokens, valid tokens] over this rank's batches, summed over ranks.
  auto sums = torch::zeros({2}, torch::TensorOptions(torch::kFloat64).device(rt.device));
  for (int64_t b = 0; b < batches; ++b) {
    std::vector<int64_t> ids(micro_batch);
    for (int64_t j = 0; j < micro_batch; ++j) ids[j] = (b * micro_batch * W + j * W + r) % n;
    const Batch batch = data.val_batch(ids, rt.device);
    if (batch.valid_tokens == 0) continue;
    core::AutocastScope autocast(rt);
    const auto loss = objective.compute(model, batch).loss.detach().to(torch::kFloat64);
    sums[0] += loss.reshape({}) * static_cast<double>(batch.valid_tokens);
    sums[1] += static_cast<double>(batch.valid_tokens);
  }
  group.allreduce(sums, dist::ReduceOp::kSum)->wait();
  if (was_training) model.train();
  const auto host = sums.cpu();
  return host[0].item<double>() / std::max(host[1].item<double>(), 1.0);
}

}  // namespace lmtrain::train
