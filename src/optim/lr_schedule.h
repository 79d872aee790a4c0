// Learning-rate schedules: linear warmup, then constant / cosine / linear / WSD
// (warmup-stable-decay) down to min_lr_ratio * peak at the last step.
#pragma once
#include <algorithm>
#include <cstdint>

#include "core/config_choice.h"
#include "core/config_schema.h"

namespace lmtrain::optim {

// optim.schedule, in the order of its choices (core/config_choice.h).
enum class LrScheduleKind { kConstant, kCosine, kLinear, kWsd };
constexpr core::ChoiceKey choice_key(LrScheduleKind) { return {"optim.schedule", 4}; }

// The keyed members start at their schema defaults (core/config_schema.h).
struct LrSchedule {
  LrScheduleKind kind = core::default_choice<LrScheduleKind>();
  double peak = core::default_float("optim.lr");
  double min_ratio = core::default_float("optim.min_lr_ratio");
  int64_t warmup_steps = core::default_int("optim.warmup_steps");
  int64_t total_steps = 1;                                              // the run's length (over())
  double decay_fraction = core::default_float("optim.decay_fraction");  // wsd only

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
