#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace lmtrain::optim {

double LrSchedule::at(int64_t step) const {
  if (step < warmup_steps) return peak * static_cast<double>(step + 1) / warmup_steps;
  const double min_lr = peak * min_ratio;
  const int64_t span = std::max<int64_t>(1, total_steps - 1 - warmup_steps);
  const double progress = std::clamp(static_cast<double>(step - warmup_steps) / span, 0.0, 1.0);
  switch (kind) {
    case LrScheduleKind::kConstant:
      return peak;
    case LrScheduleKind::kCosine:
      return min_lr + (peak - min_lr) * 0.5 * (1.0 + std::cos(M_PI * progress));
    case LrScheduleKind::kLinear:
      return peak - (peak - min_lr) * progress;
    case LrScheduleKind::kWsd: {
      // Stable at peak, then a linear decay over the last decay_fraction of all steps.
      const double decay_steps = std::max(1.0, decay_fraction * total_steps);
      const double decay_start = total_steps - decay_steps;
      if (step < decay_start) return peak;
      const double t = std::clamp((step - decay_start + 1) / decay_steps, 0.0, 1.0);
      return peak - (peak - min_lr) * t;
    }
  }
  throw Error("unknown lr schedule " + std::to_string(static_cast<int>(kind)));
}

}  // namespace lmtrain::optim
