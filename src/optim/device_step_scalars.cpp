#include "optim/device_step_scalars.h"

#include <ATen/ATen.h>

#include "core/error.h"

namespace lmtrain::optim {

void DeviceStepScalars::begin(const c10::Device& device, double lr, int64_t step) {
  make(device);
  if (!steps_.defined()) {
    steps_ =
        at::full({}, static_cast<double>(step - 1), at::TensorOptions(device).dtype(at::kFloat));
  }
  if (!held_) lr_.fill_(lr);
  steps_.add_(1);
}

const DeviceStepScalars* DeviceStepScalars::begin_on_gpu(const at::Tensor& params, double lr,
                                                         int64_t step) {
  if (!params.is_cuda()) return nullptr;
  begin(params.device(), lr, step);
  return this;
}

at::Tensor DeviceStepScalars::decay_factor(double weight_decay) const {
  return 1.0 - lr_ * weight_decay;
}

at::Tensor DeviceStepScalars::hold_lr(const c10::Device& device) {
  held_ = true;
  return make(device);
}

const at::Tensor& DeviceStepScalars::make(const c10::Device& device) {
  if (!lr_.defined()) lr_ = at::zeros({}, at::TensorOptions(device).dtype(at::kFloat));
  if (lr_.device() != device) {
    throw Error("internal: the optimizer's step scalars live on another device");
  }
  return lr_;
}

void DeviceStepScalars::reset() {
  // A captured graph keeps the count's address: dropping the tensor would leave it writing
  // freed memory, and a new count would not be in the graph.
  if (held_) {
    throw Error(
        "internal: optimizer state loaded after a CUDA graph captured the update (the graph "
        "holds the step count it advances)");
  }
  steps_ = at::Tensor();
}

StepDecay::StepDecay(double lr, double weight_decay, const DeviceStepScalars* device_scalars)
    : host_factor_(1.0 - lr * weight_decay) {
  if (device_scalars) device_factor_ = device_scalars->decay_factor(weight_decay);
}

void StepDecay::apply(at::Tensor part) const {
  if (device_factor_.defined()) {
    part.mul_(device_factor_);
  } else {
    part.mul_(host_factor_);
  }
}

}  // namespace lmtrain::optim
