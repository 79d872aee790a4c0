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

const DeviceStepScalars* DeviceStepScalars::begin_on_device(const at::Tensor& params, double lr,
                                                            int64_t step) {
  if (!params.is_cuda() && !on_cpu_) return nullptr;
  begin(params.device(), lr, step);
  return this;
}

void DeviceStepScalars::skip_if(const at::Tensor& found_inf) {
  if (!steps_.defined()) throw Error("internal: skip_if() before begin()");
  // As torch.optim.AdamW(fused=True) under a GradScaler: the count advanced before the update,
  // and the kernel skipped itself, so only the count's advance is taken back.
  steps_.sub_(found_inf);
  if (!skipped_.defined()) skipped_ = at::zeros({}, steps_.options().dtype(at::kLong));
  skipped_.add_(found_inf.to(at::kLong));
}

int64_t DeviceStepScalars::skipped() const {
  return skipped_.defined() ? skipped_.item<int64_t>() : 0;
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
  skipped_ = at::Tensor();
}

}  // namespace lmtrain::optim
