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

void DeviceStepScalars::reset() { steps_ = at::Tensor(); }

}  // namespace lmtrain::optim
