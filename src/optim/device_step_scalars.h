// AdamW's per-step scalars on a GPU, so that an update reads no value from the host and a
// captured CUDA graph (train/cuda_graph_step.h) can replay it: the learning rate, a 0-dim
// float32 tensor written before each update, and the step count, a 0-dim float32 tensor (as
// torch.optim.AdamW(fused=True) keeps it) that the update itself advances. Eager CUDA steps use
// them too, so a replayed step runs exactly the kernels of an eager one.
//
// fp16's device-side skip (optim/loss_scaler.h): an update told a found_inf flag (a 0-dim float32
// tensor, 1 = skip) leaves everything as it was, decided on the device: the fused kernel (which
// applies the weight decay too, optim::adamw_update) skips itself on the flag, and skip_if() takes
// the count's advance back and counts the skipped update, so that the host can read how many
// updates were skipped (skipped()) after the step.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>

namespace lmtrain::optim {

class DeviceStepScalars {
 public:
  // Before update number `step` (1 for the first) on `device`: makes the tensors on first use,
  // writes `lr` unless held, and advances the count on the device.
  void begin(const c10::Device& device, double lr, int64_t step);
  // begin() when `params` live on a GPU (or use_on_cpu() was called), returning this; nullptr
  // on a CPU, whose update keeps its host scalars.
  const DeviceStepScalars* begin_on_device(const at::Tensor& params, double lr, int64_t step);
  // Tests: the CPU takes the GPU's path too (libtorch's fused AdamW with these tensors), so
  // that a CPU run can be compared bit for bit with one whose updates are skipped on the device.
  void use_on_cpu() { on_cpu_ = true; }
  // After an update of this step that `found_inf` (0-dim float32, on the device) may have
  // skipped: when it is 1, the count goes back to where it was and the skip is counted.
  void skip_if(const at::Tensor& found_inf);
  // Updates skipped since begin() first ran or since reset() (waits for the device).
  int64_t skipped() const;
  // Valid after begin().
  const at::Tensor& lr() const { return lr_; }
  const at::Tensor& steps() const { return steps_; }

  // The learning-rate tensor, made on `device` if needed. While held, begin() leaves it as the
  // caller wrote it: a CUDA graph's captured update must not contain a fill with the capture's
  // value, so the graph's driver writes it before each replay.
  at::Tensor hold_lr(const c10::Device& device);
  // After a checkpoint load: the count restarts from the host's at the next begin(). Throws
  // once the lr is held (a graph has captured the update and reads these very tensors).
  void reset();

 private:
  const at::Tensor& make(const c10::Device& device);  // the lr tensor, made on first use

  at::Tensor lr_, steps_;
  at::Tensor skipped_;  // int64 0-dim: updates skipped on the device (made by the first skip_if)
  bool held_ = false;
  bool on_cpu_ = false;
};

}  // namespace lmtrain::optim
