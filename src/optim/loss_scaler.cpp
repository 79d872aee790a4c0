#include "optim/loss_scaler.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "distributed/group.h"

namespace lmtrain::train {
namespace {

// The scale as the device form holds it (float32).
double as_float32(double scale) { return static_cast<double>(static_cast<float>(scale)); }

// _amp_update_scale_ keeps the clean-step count in an int32 and takes the window as an int: a
// window beyond that (train.loss_scale_window allows 9e15) never ends in any real run either.
int64_t device_window(int64_t growth_interval) {
  return std::min<int64_t>(growth_interval, std::numeric_limits<int32_t>::max());
}

// grads *= inv_scale in one pass that raises found_inf (fp32, zero on entry) on inf/nan, then
// found_inf's MAX over `group`: sharded optimizers hold different gradient shards per rank, and
// every rank must skip together. A device collective under NCCL, so a captured graph holds it.
void unscale_and_flag(at::TensorList grads, dist::Group& group, at::Tensor& found_inf,
                      const at::Tensor& inv_scale) {
  at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale);
  group.allreduce(found_inf, dist::ReduceOp::kMax)->wait();
}

}  // namespace

LossScaler::LossScaler(bool enabled, double init_scale, int64_t growth_interval)
    : enabled_(enabled), growth_interval_(growth_interval) {
  state_.scale = enabled ? as_float32(init_scale) : 1.0;
}

void LossScaler::keep_on_device(const c10::Device& device) {
  if (!enabled_ || on_device()) {
    throw Error("internal: only an enabled loss scaler on the host moves to the device, once");
  }
  const auto on = at::TensorOptions(device);
  scale_t_ = at::full({}, state_.scale, on.dtype(at::kFloat));
  good_t_ = at::zeros({}, on.dtype(at::kInt));
  skipped_t_ = at::zeros({}, on.dtype(at::kLong));
  found_inf_t_ = at::zeros({}, on.dtype(at::kFloat));
  restore(state_);
}

double LossScaler::scale() const {
  return on_device() ? static_cast<double>(scale_t_.item<float>()) : state_.scale;
}

LossScalerState LossScaler::state() const {
  if (!on_device()) return state_;
  LossScalerState s;
  s.scale = scale();
  s.good_steps = good_t_.item<int32_t>();
  s.skipped_steps = skipped_t_.item<int64_t>();
  return s;
}

void LossScaler::restore(const LossScalerState& s) {
  if (!enabled_) return;
  state_ = s;
  state_.scale = as_float32(s.scale);
  if (!on_device()) return;
  // update() grows once good_steps reaches the window, _amp_update_scale_ when it equals it: a
  // count at or past the window (a checkpoint of a run with a longer one) becomes window - 1,
  // which grows at the next clean step, as update() would.
  const int64_t good = std::min(s.good_steps, device_window(growth_interval_) - 1);
  at::NoGradGuard no_grad;
  scale_t_.fill_(state_.scale);
  good_t_.fill_(std::max<int64_t>(good, 0));
  skipped_t_.fill_(s.skipped_steps);
}

at::Tensor LossScaler::scale_loss(const at::Tensor& loss) const {
  if (!enabled_) return loss;
  return on_device() ? loss * scale_t_ : loss * state_.scale;
}

bool LossScaler::unscale_and_check(at::TensorList grads, dist::Group& group) const {
  if (!enabled_) return false;
  if (on_device()) throw Error("internal: the loss scaler lives on the device");
  if (grads.empty()) throw Error("internal: LossScaler::unscale_and_check without gradients");
  at::NoGradGuard no_grad;
  const auto flag_options = grads.front().options().dtype(at::kFloat);
  auto found_inf = at::zeros({1}, flag_options);
  auto inv_scale = at::full({1}, 1.0 / state_.scale, flag_options);
  unscale_and_flag(grads, group, found_inf, inv_scale);
  return found_inf.item<float>() > 0;
}

void LossScaler::update(bool found_inf) {
  if (!enabled_) return;
  if (found_inf) {
    state_.scale = as_float32(state_.scale / 2);
    state_.good_steps = 0;
    ++state_.skipped_steps;
    return;
  }
  if (++state_.good_steps >= growth_interval_) {
    // As _amp_update_scale_: the scale grows only while it stays a finite float32.
    if (std::isfinite(static_cast<float>(state_.scale * 2))) state_.scale *= 2;
    state_.good_steps = 0;
  }
}

const at::Tensor& LossScaler::unscale_and_check_on_device(at::TensorList grads,
                                                          dist::Group& group) {
  if (!on_device()) throw Error("internal: the loss scaler lives on the host");
  at::NoGradGuard no_grad;
  found_inf_t_.zero_();
  // 1/scale as the host form computes it (in double, then float32): exact for powers of two.
  const auto inv_scale = scale_t_.to(at::kDouble).reciprocal().to(at::kFloat);
  unscale_and_flag(grads, group, found_inf_t_, inv_scale);
  return found_inf_t_;
}

void LossScaler::update_on_device() {
  if (!on_device()) throw Error("internal: the loss scaler lives on the host");
  at::NoGradGuard no_grad;
  // found_inf: scale * 0.5 and the count restarts; else the count grows, and at the window the
  // scale doubles (if finite) and the count restarts. update()'s rules, in one kernel.
  at::_amp_update_scale_(scale_t_, good_t_, found_inf_t_, 2.0, 0.5,
                         device_window(growth_interval_));
  skipped_t_.add_(found_inf_t_.to(at::kLong));
}

}  // namespace lmtrain::train
