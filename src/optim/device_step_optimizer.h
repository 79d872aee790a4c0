// What AdamW and ZeRO AdamW share around their update: the host's count of started updates and
// the device step scalars (device_step_scalars.h), and from them the hooks of Optimizer that a
// CUDA graph (graph_safe, hold_lr, count_replayed_step) and fp16's device-side skip
// (skips_on_device, step_unless, step_count less the skipped updates) need.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>

#include "optim/device_step_scalars.h"
#include "optim/optimizer.h"

namespace lmtrain::optim {

class DeviceStepOptimizer : public Optimizer {
 public:
  void step(double lr) override { update(lr, {}); }
  int64_t step_count() const override { return step_ - scalars_.skipped(); }
  int64_t steps_started() const override { return step_; }
  bool skips_on_device() const override { return true; }
  void step_unless(double lr, const at::Tensor& found_inf) override { update(lr, found_inf); }
  void use_device_scalars() override { scalars_.use_on_cpu(); }
  bool graph_safe() const override { return params_device().is_cuda(); }
  at::Tensor hold_lr() override { return scalars_.hold_lr(params_device()); }
  void count_replayed_step() override { ++step_; }

 protected:
  // One update from the gradients: ++step_, then (with a defined found_inf, on scalars_) one
  // that found_inf = 1 skips on the device.
  virtual void update(double lr, const at::Tensor& found_inf) = 0;
  virtual c10::Device params_device() const = 0;
  // After a checkpoint load: `step` updates applied; the device count restarts from it.
  void restart_count(int64_t step) {
    step_ = step;
    scalars_.reset();
  }

  int64_t step_ = 0;           // steps_started(): skipped updates included
  DeviceStepScalars scalars_;  // on CUDA: lr and step count on the device
};

}  // namespace lmtrain::optim
