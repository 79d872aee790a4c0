// Learning-rate schedules: linear warmup, then constant / cosine / linear / WSD
// (warmup-stable-decay) down to min_lr_ratio * peak at the last step.
#pragma once
#include <algorithm>
#include <cstdint>

#include "core/config_choice.h"

namespace lmtrain::optim {

// optim.schedule, in the order of its choices (core/config_choice.h).
enum class LrScheduleKind { kConstant, kCosine, kLinear, kWsd };
constexpr core::ChoiceKey choice_key(LrScheduleKind) { return {"optim.schedule", 4}; }

struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::kCosine;
  double peak = 6e-4;
  double min_ratio = 0.1;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  double decay_fraction = 0.2;  // wsd only

  // This schedule over `steps` optimizer steps (at least 1): a run knows its length only once
  // its data is open.
  LrSchedule over(int64_t steps) const {
    LrSchedule s = *this;
    s.total_steps = std::max<int64_t>(1, steps);
    return s;
  }
  // lr for optimizer step `step` (0-based).
  double at(int64_t step) const;
};

}  // namespace lmtrain::optim
