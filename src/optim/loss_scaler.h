// Dynamic loss scaling for fp16 training (as torch.cuda.amp.GradScaler): the loss is multiplied
// by `scale` before backward so small gradients survive fp16; the gradients are divided by it
// before clipping and the update. A step whose gradients hold inf/nan (on any rank) is skipped
// and the scale halved; after `growth_interval` clean steps in a row the scale doubles (unless
// that leaves float32's range). Disabled (scale 1, nothing checked) for fp32 and bf16.
//
// The scale is a float32 value (GradScaler's), in both forms below: train.loss_scale is rounded
// to float32 once, and halving and doubling are exact, so the two forms agree bit for bit.
//
// Two forms of the same rules:
// - on the host (the CPU's default): unscale_and_check() reads the all-reduced found_inf flag
//   once per step, and the step skips the update there; update() then moves the host state.
// - on the device (keep_on_device(): every CUDA run whose optimizer can skip on the device, and
//   CPU tests): the scale, the count of clean steps, the count of skipped steps and the step's
//   found_inf flag are tensors on the device. unscale_and_check_on_device() raises the flag
//   (libtorch's fused AMP kernel, then a MAX all-reduce over the group as a device collective),
//   the optimizer's update is skipped on the device through that flag
//   (Optimizer::step_unless), and update_on_device() moves the state with libtorch's
//   _amp_update_scale_. Nothing is read on the host during a step, so a CUDA graph captures it
//   (train/cuda_graph_step.h); scale() and state() read the tensors, after the step.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>

namespace lmtrain::dist {
class Group;
}

namespace lmtrain::train {

struct LossScalerState {
  double scale = 1.0;
  int64_t good_steps = 0;     // clean steps since the last change of scale
  int64_t skipped_steps = 0;  // steps skipped for inf/nan gradients, over the whole run
};

class LossScaler {
 public:
  LossScaler(bool enabled, double init_scale, int64_t growth_interval);

  bool enabled() const { return enabled_; }
  // From now on the state lives in tensors on `device` (see above). Enabled scalers only; once.
  void keep_on_device(const c10::Device& device);
  bool on_device() const { return scale_t_.defined(); }

  // On the device: read from its tensors (each waits for the device).
  double scale() const;
  LossScalerState state() const;
  // A checkpoint's state (written in place on the device: a captured graph keeps the tensors).
  void restore(const LossScalerState& s);

  // loss * scale (the loss itself when disabled).
  at::Tensor scale_loss(const at::Tensor& loss) const;

  // `grads`: every gradient tensor this rank updates, e.g. ZeRO-3's shard and, under expert
  // parallelism, this rank's expert region (one tensor converts to a list of one).
  // The host form. Divides `grads` by the scale in place and tells whether any rank's
  // gradients (their part of `grads`) hold inf or nan: one flag all-reduced over `group`, read
  // once per step.
  bool unscale_and_check(at::TensorList grads, dist::Group& group) const;
  // After the step: halve on overflow (the step was skipped), grow after a clean window.
  void update(bool found_inf);

  // The device form. Divides `grads` by the scale in place and returns the step's found_inf
  // flag: a 0-dim float32 tensor on the device, 1 when any rank's gradients hold inf or nan
  // (MAX over `group`), else 0. The same tensor every step (a graph reads it at one address);
  // clone it to keep a step's value.
  const at::Tensor& unscale_and_check_on_device(at::TensorList grads, dist::Group& group);
  // After the step's (possibly skipped) update: the rules of update(found_inf), on the device.
  void update_on_device();

 private:
  bool enabled_;
  int64_t growth_interval_;
  LossScalerState state_;  // the host form's state
  // The device form's: scale (float32), good steps (int32, as _amp_update_scale_ keeps them),
  // skipped steps (int64) and the step's found_inf flag (float32), each 0-dim.
  at::Tensor scale_t_, good_t_, skipped_t_, found_inf_t_;
};

}  // namespace lmtrain::train
