#include "train/evaluator.h"

#include <functional>

#include "core/progress.h"
#include "data/batch.h"
#include "data/window_stream.h"
#include "objective/objective.h"
#include "train/training_data.h"

namespace lmtrain::train {

namespace {

// The mean loss per valid target token of `batches` micro-batches per rank, over every rank:
// batch b of rank r holds samples (b * B * W + j * W + r) mod n, j < B, so small splits wrap
// around and every rank evaluates the same number of samples.
double evaluate_samples(model::GptImpl& model, Objective& objective, int64_t n,
                        const std::function<Batch(const std::vector<int64_t>&)>& make_batch,
                        int64_t micro_batch, int64_t batches, dist::Group& group,
                        const core::Runtime& rt, core::Progress* progress) {
  const bool was_training = model.is_training();
  model.eval();
  torch::NoGradGuard no_grad;
  const int64_t W = group.size(), r = group.rank();
  // [sum of loss * valid tokens, valid tokens] over this rank's batches, summed over ranks.
  auto sums = torch::zeros({2}, torch::TensorOptions(torch::kFloat64).device(rt.device));
  for (int64_t b = 0; b < batches; ++b) {
    std::vector<int64_t> ids(micro_batch);
    for (int64_t j = 0; j < micro_batch; ++j) ids[j] = (b * micro_batch * W + j * W + r) % n;
    const Batch batch = make_batch(ids);
    if (progress) progress->add(1);
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

}  // namespace

double evaluate(model::GptImpl& model, data::WindowStream& split, int64_t micro_batch,
                int64_t batches, dist::Group& group, const core::Runtime& rt,
                core::Progress* progress) {
  LmObjective objective;
  return evaluate_samples(
      model, objective, split.num_windows(),
      [&](const std::vector<int64_t>& ids) {
        auto [x, y] = data::make_batch(split, ids, rt.device);
        return Batch::lm(std::move(x), std::move(y));
      },
      micro_batch, batches, group, rt, progress);
}

double evaluate(model::GptImpl& model, Objective& objective, TrainingData& data,
                int64_t micro_batch, int64_t batches, dist::Group& group, const core::Runtime& rt) {
  return evaluate_samples(
      model, objective, data.val_samples(),
      [&](const std::vector<int64_t>& ids) { return data.val_batch(ids, rt.device); }, micro_batch,
      batches, group, rt, nullptr);
}

}  // namespace lmtrain::train
