#include "train/train_step.h"

#include <cmath>

namespace lmtrain::train {

StepResult train_step(model::GptImpl& model, optim::FlatParams& flat, optim::AdamW& opt,
                      dist::Group& group, int64_t accum_steps, const MicroBatchFn& next_batch,
                      double lr, double grad_clip) {
  flat.zero_grad();
  double loss_sum = 0;
  for (int64_t m = 0; m < accum_steps; ++m) {
    auto [x, y] = next_batch(m);
    auto loss = model.loss(x, y);
    // Each backward() sums into the grads, so scale here to get the mean over micro-batches.
    (loss / static_cast<double>(accum_steps)).backward();
    loss_sum += loss.item<double>();
  }
  // Average across ranks (a no-op in a world of one).
  auto grads = flat.grads();
  group.allreduce(grads, dist::ReduceOp::kAvg)->wait();
  auto loss_t = torch::tensor({loss_sum / accum_steps}, torch::kFloat64);
  group.allreduce(loss_t, dist::ReduceOp::kAvg)->wait();

  StepResult r;
  r.loss = loss_t.item<double>();
  r.grad_norm = flat.grad_norm();
  if (grad_clip > 0) {
    // Same rule as torch.nn.utils.clip_grad_norm_.
    const double coef = grad_clip / (r.grad_norm + 1e-6);
    if (coef < 1.0) grads.mul_(coef);
  }
  opt.step(lr);
  return r;
}

}  // namespace lmtrain::train
