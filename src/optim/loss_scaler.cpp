#include "optim/loss_scaler.h"

#include <ATen/ATen.h>

#include "distributed/group.h"

namespace lmtrain::train {

LossScaler::LossScaler(bool enabled, double init_scale, int64_t growth_interval)
    : enabled_(enabled), growth_interval_(growth_interval) {
  state_.scale = enabled ? init_scale : 1.0;
}

void LossScaler::restore(const LossScalerState& s) {
  if (enabled_) state_ = s;
}

at::Tensor LossScaler::scale_loss(const at::Tensor& loss) const {
  return enabled_ ? loss * state_.scale : loss;
}

bool LossScaler::unscale_and_check(at::Tensor& grads, dist::Group& group) const {
  if (!enabled_) return false;
  at::NoGradGuard no_grad;
  // The fused AMP kernel: one pass that multiplies by 1/scale and raises found_inf.
  auto found_inf = at::zeros({1}, grads.options().dtype(at::kFloat));
  auto inv_scale = at::full({1}, 1.0 / state_.scale, grads.options().dtype(at::kFloat));
  std::vector<at::Tensor> list{grads};
  at::_amp_foreach_non_finite_check_and_unscale_(list, found_inf, inv_scale);
  // Sharded optimizers hold different gradient shards per rank: every rank must skip together.
  group.allreduce(found_inf, dist::ReduceOp::kMax)->wait();
  return found_inf.item<float>() > 0;
}

void LossScaler::update(bool found_inf) {
  if (!enabled_) return;
  if (found_inf) {
    state_.scale /= 2;
    state_.good_steps = 0;
    ++state_.skipped_steps;
    return;
  }
  if (++state_.good_steps >= growth_interval_) {
    state_.scale *= 2;
    state_.good_steps = 0;
  }
}

}  // namespace lmtrain::train
