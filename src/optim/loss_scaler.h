// Dynamic loss scaling for fp16 training (as torch.cuda.amp.GradScaler): the loss is multiplied
// by `scale` before backward so small gradients survive fp16; the gradients are divided by it
// before clipping and the update. A step whose gradients hold inf/nan (on any rank) is skipped
// and the scale halved; after `growth_interval` clean steps in a row the scale doubles.
// Disabled (scale 1, nothing checked) for fp32 and bf16.
#pragma once
#include <ATen/core/Tensor.h>

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
  double scale() const { return state_.scale; }
  const LossScalerState& state() const { return state_; }
  void restore(const LossScalerState& s);

  // loss * scale (the loss itself when disabled).
  at::Tensor scale_loss(const at::Tensor& loss) const;
  // Divides `grads` by the scale in place and tells whether any rank's gradients (their
  // part of `grads`) hold inf or nan: one flag all-reduced over `group`, read once per step.
  bool unscale_and_check(at::Tensor& grads, dist::Group& group) const;
  // After the step: halve on overflow (the step was skipped), grow after a clean window.
  void update(bool found_inf);

 private:
  bool enabled_;
  int64_t growth_interval_;
  LossScalerState state_;
};

}  // namespace lmtrain::train
