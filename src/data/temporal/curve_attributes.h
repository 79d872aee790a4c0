// What a synthetic curve is made of (issue 26): the attribute classes a question asks about
// (trend, seasonality, noise, spikes, level shift) and each channel's numbers, and the curve
// they make. The ranges keep every class clearly separable in the curve itself (see the
// constants in curve_attributes.cpp): a flat trend changes by at most 0.1 over the series
// against 2.5 to 5 for a rising or falling one; high noise is 5 times low noise or more; a
// spike is at least 4 and at least 12 noise deviations away from its neighbours; a level shift
// is 1.5 to 2.5; a seasonal amplitude 0.8 to 2 over at least 4 periods (noise: at most 0.5).
// All of these are in "shape units", multiplied by the channel's scale.
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <vector>

#include "data/temporal/counter_rng.h"
#include "data/temporal/temporal_sample.h"

namespace lmtrain::data::temporal {

enum class Trend { kIncreasing = 0, kDecreasing = 1, kFlat = 2 };
enum class SpikeCount { kNone = 0, kOne = 1, kSeveral = 2 };  // several: 2 to 4

// One channel's numbers, in value units (shape units times `scale`):
//   x(t) = offset + slope * (t - (L - 1) / 2)
//        + amplitude * sin(2 pi t / period + phase) + harmonic * sin(4 pi t / period +
//        harmonic_phase)
//        + shift * [t >= shift_position] + sum_k spike_heights[k] * [t == spike_positions[k]]
//        + noise_std * N(0, 1)
struct ChannelShape {
  double scale = 1;                 // the shape-to-value factor (log-uniform in [0.01, 1000])
  double offset = 0;                // about the series' mean
  double slope = 0;                 // per time step
  double amplitude = 0, phase = 0;  // 0 when aperiodic
  double harmonic = 0, harmonic_phase = 0;  // the second harmonic, at most 0.3 * amplitude
  double noise_std = 0;
  double shift = 0;                   // the level shift's height, 0 when there is none
  std::vector<double> spike_heights;  // one per spike position
};

// The classes (shared by every channel, so the answer is the same for all) and the positions.
struct CurveAttributes {
  int64_t length = 0;
  Trend trend = Trend::kFlat;
  bool periodic = false;
  int64_t period = 0;  // time steps, when periodic (an integer in [8, max(8, L / 4)])
  bool high_noise = false;
  SpikeCount spikes = SpikeCount::kNone;
  std::vector<int64_t> spike_positions;  // ascending
  bool level_shift = false;
  int64_t shift_position = -1;       // the first time step at the new level, when level_shift
  std::vector<ChannelShape> curves;  // one per channel
};

// Which classes are fixed before drawing (-1: drawn at random): the class a question asks
// about, and what a numeric question needs (a period needs periodic = 1).
struct ClassConstraints {
  int trend = -1;        // Trend
  int periodic = -1;     // 0 / 1
  int high_noise = -1;   // 0 / 1
  int spikes = -1;       // SpikeCount
  int level_shift = -1;  // 0 / 1
};

// Draws the attributes of a curve of `length` (>= 32) values and `channels` channels. A curve
// that would be flat, aperiodic and without a level shift (pure noise, whose noise level
// cannot be told once normalised) gets seasonality, or when that is fixed, a trend.
CurveAttributes draw_curve_attributes(CounterRng& rng, int64_t length, int64_t channels,
                                      const ClassConstraints& fixed);

// The curve without noise (all the terms above but the last) of channel `c` at step `t`;
// `with_spikes` = false leaves the spikes out too.
double clean_value(const CurveAttributes& a, int64_t c, int64_t t, bool with_spikes = true);

// The curve: clean values plus noise drawn from `rng`, rounded to float; every value valid.
SeriesValues render_curve(const CurveAttributes& a, CounterRng& rng);

// Every attribute as JSON (classes by their canonical names; numbers per channel).
nlohmann::json attributes_to_json(const CurveAttributes& a);

// The canonical names: "increasing" / "decreasing" / "flat", "none" / "one" / "several".
const char* trend_name(Trend t);
const char* spike_count_name(SpikeCount s);

}  // namespace lmtrain::data::temporal
