#include "optim/lr_schedule.h"

#include <gtest/gtest.h>

#include <cmath>

#include "cli/read_options.h"
#include "core/config.h"

namespace lmtrain::optim {
namespace {

LrSchedule make(LrScheduleKind kind, int64_t warmup, int64_t total) {
  LrSchedule s;
  s.kind = kind;
  s.peak = 1.0;
  s.min_ratio = 0.1;
  s.warmup_steps = warmup;
  s.total_steps = total;
  s.decay_fraction = 0.2;
  return s;
}

TEST(LrSchedule, WarmupIsLinearToPeak) {
  auto s = make(LrScheduleKind::kCosine, 4, 100);
  EXPECT_DOUBLE_EQ(s.at(0), 0.25);
  EXPECT_DOUBLE_EQ(s.at(1), 0.5);
  EXPECT_DOUBLE_EQ(s.at(3), 1.0);
}

TEST(LrSchedule, CosineEndsAtMinAndIsHalfwayInTheMiddle) {
  auto s = make(LrScheduleKind::kCosine, 0, 101);
  EXPECT_DOUBLE_EQ(s.at(0), 1.0);
  EXPECT_NEAR(s.at(50), 0.55, 1e-12);  // min + (peak-min)/2
  EXPECT_NEAR(s.at(100), 0.1, 1e-12);
  EXPECT_NEAR(s.at(25), 0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * 0.25)), 1e-12);
}

TEST(LrSchedule, LinearAndConstant) {
  auto lin = make(LrScheduleKind::kLinear, 0, 11);
  EXPECT_NEAR(lin.at(5), 0.55, 1e-12);
  EXPECT_NEAR(lin.at(10), 0.1, 1e-12);
  auto c = make(LrScheduleKind::kConstant, 2, 10);
  EXPECT_DOUBLE_EQ(c.at(0), 0.5);
  EXPECT_DOUBLE_EQ(c.at(7), 1.0);
}

TEST(LrSchedule, WsdHoldsThenDecaysOverLastFraction) {
  auto s = make(LrScheduleKind::kWsd, 10, 100);  // decay over the last 20 steps: 80..99
  EXPECT_DOUBLE_EQ(s.at(10), 1.0);
  EXPECT_DOUBLE_EQ(s.at(79), 1.0);
  EXPECT_NEAR(s.at(80), 1.0 - 0.9 / 20, 1e-12);
  EXPECT_NEAR(s.at(89), 1.0 - 0.9 * 10 / 20, 1e-12);
  EXPECT_NEAR(s.at(99), 0.1, 1e-12);
}

TEST(LrSchedule, FromConfig) {
  auto cfg = core::Config::defaults();
  cfg.set("optim.lr", "0.01", "test");
  cfg.set("optim.schedule", "linear", "test");
  cfg.set("optim.warmup_steps", "5", "test");
  auto s = cli::read_lr_schedule(cfg).over(50);
  EXPECT_EQ(s.kind, LrScheduleKind::kLinear);
  EXPECT_DOUBLE_EQ(s.at(4), 0.01);
  EXPECT_NEAR(s.at(49), 0.001, 1e-12);
}

}  // namespace
}  // namespace lmtrain::optim
