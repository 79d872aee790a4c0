#include "data/temporal/curve_attributes.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace lmtrain::data::temporal {
namespace {

constexpr double kTwoPi = 6.283185307179586;

// The ranges that keep the classes apart, in shape units (see curve_attributes.h).
constexpr double kTrendChangeMin = 2.5, kTrendChangeMax = 5.0;  // rise / fall over the series
constexpr double kFlatChangeMax = 0.1;
constexpr double kAmplitudeMin = 0.8, kAmplitudeMax = 2.0;
constexpr double kHarmonicMax = 0.3;  // of the amplitude
constexpr double kLowNoiseMin = 0.02, kLowNoiseMax = 0.06;
constexpr double kHighNoiseMin = 0.3, kHighNoiseMax = 0.5;
constexpr double kShiftMin = 1.5, kShiftMax = 2.5;
constexpr double kSpikeMin = 4.0, kSpikeNoiseMultiple = 12.0, kSpikeSpread = 1.5;
constexpr double kLogScaleMin = -4.605170185988091, kLogScaleMax = 6.907755278982137;  // 0.01, 1000
constexpr double kOffsetMax = 10.0;
constexpr int64_t kMinPeriod = 8;

// Spike positions: `count` distinct steps in [m, L - 1 - m], at least m = max(3, L/16) apart
// (so no two fall among one spike's 2 neighbours on each side), none at the level shift or just
// before it (where the step itself would hide them).
std::vector<int64_t> draw_spike_positions(CounterRng& rng, int64_t length, int64_t count,
                                          int64_t shift_position) {
  const int64_t margin = std::max<int64_t>(3, length / 16);
  std::vector<int64_t> out;
  for (int attempt = 0; static_cast<int64_t>(out.size()) < count; ++attempt) {
    if (attempt > 100000) {
      throw Error("temporal generator: cannot place " + std::to_string(count) +
                  " spikes in a series of " + std::to_string(length) + " values");
    }
    const int64_t t = rng.between(margin, length - 1 - margin);
    bool ok = !(shift_position >= 0 && (t == shift_position || t == shift_position - 1));
    for (int64_t p : out) ok = ok && std::llabs(p - t) >= margin;
    if (ok) out.push_back(t);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

const char* trend_name(Trend t) {
  switch (t) {
    case Trend::kIncreasing:
      return "increasing";
    case Trend::kDecreasing:
      return "decreasing";
    case Trend::kFlat:
      return "flat";
  }
  return "?";
}

const char* spike_count_name(SpikeCount s) {
  switch (s) {
    case SpikeCount::kNone:
      return "none";
    case SpikeCount::kOne:
      return "one";
    case SpikeCount::kSeveral:
      return "several";
  }
  return "?";
}

CurveAttributes draw_curve_attributes(CounterRng& rng, int64_t length, int64_t channels,
                                      const ClassConstraints& fixed) {
  CurveAttributes a;
  a.length = length;
  // The classes, in a fixed order (each draw consumes the stream whether fixed or not, so a
  // fixed class does not shift the draws after it).
  const auto pick = [&](int fixed_value, int64_t n) {
    const int64_t drawn = rng.below(n);
    return fixed_value >= 0 ? static_cast<int64_t>(fixed_value) : drawn;
  };
  a.trend = static_cast<Trend>(pick(fixed.trend, 3));
  a.periodic = pick(fixed.periodic, 2) == 1;
  a.high_noise = pick(fixed.high_noise, 2) == 1;
  a.spikes = static_cast<SpikeCount>(pick(fixed.spikes, 3));
  a.level_shift = pick(fixed.level_shift, 2) == 1;
  const bool up = rng.coin();
  if (a.trend == Trend::kFlat && !a.periodic && !a.level_shift) {
    // Pure noise: its noise level would be invisible once normalised. Give it structure.
    if (fixed.periodic < 0) {
      a.periodic = true;
    } else if (fixed.trend < 0) {
      a.trend = up ? Trend::kIncreasing : Trend::kDecreasing;
    } else if (fixed.level_shift < 0) {
      a.level_shift = true;
    }
  }

  const int64_t max_period = std::max(kMinPeriod, length / 4);
  const int64_t period = rng.between(kMinPeriod, max_period);
  const int64_t shift_position = rng.between(length / 5, (4 * length) / 5);
  a.period = a.periodic ? period : 0;
  a.shift_position = a.level_shift ? shift_position : -1;
  const int64_t n_spikes = a.spikes == SpikeCount::kNone  ? 0
                           : a.spikes == SpikeCount::kOne ? 1
                                                          : rng.between(2, 4);
  a.spike_positions = draw_spike_positions(rng, length, n_spikes, a.shift_position);

  for (int64_t c = 0; c < channels; ++c) {
    ChannelShape s;
    s.scale = std::exp(rng.uniform(kLogScaleMin, kLogScaleMax));
    s.offset = s.scale * rng.uniform(-kOffsetMax, kOffsetMax);
    const double change = a.trend == Trend::kFlat
                              ? rng.uniform(-kFlatChangeMax, kFlatChangeMax)
                              : rng.uniform(kTrendChangeMin, kTrendChangeMax) *
                                    (a.trend == Trend::kIncreasing ? 1.0 : -1.0);
    s.slope = s.scale * change / static_cast<double>(length - 1);
    const double amplitude = rng.uniform(kAmplitudeMin, kAmplitudeMax);
    const double phase = rng.uniform(0, kTwoPi);
    const double harmonic = rng.uniform(0, kHarmonicMax) * amplitude;
    const double harmonic_phase = rng.uniform(0, kTwoPi);
    if (a.periodic) {
      s.amplitude = s.scale * amplitude;
      s.phase = phase;
      s.harmonic = s.scale * harmonic;
      s.harmonic_phase = harmonic_phase;
    }
    const double noise = a.high_noise ? rng.uniform(kHighNoiseMin, kHighNoiseMax)
                                      : rng.uniform(kLowNoiseMin, kLowNoiseMax);
    s.noise_std = s.scale * noise;
    const double shift = rng.sign() * rng.uniform(kShiftMin, kShiftMax);
    if (a.level_shift) s.shift = s.scale * shift;
    for (size_t k = 0; k < a.spike_positions.size(); ++k) {
      const double height = rng.sign() * rng.uniform(1.0, kSpikeSpread) *
                            std::max(kSpikeMin, kSpikeNoiseMultiple * noise);
      s.spike_heights.push_back(s.scale * height);
    }
    a.curves.push_back(std::move(s));
  }
  return a;
}

double clean_value(const CurveAttributes& a, int64_t c, int64_t t, bool with_spikes) {
  const ChannelShape& s = a.curves[static_cast<size_t>(c)];
  const double td = static_cast<double>(t);
  double v = s.offset + s.slope * (td - static_cast<double>(a.length - 1) / 2.0);
  if (a.periodic) {
    const double w = kTwoPi / static_cast<double>(a.period);
    v += s.amplitude * std::sin(w * td + s.phase) +
         s.harmonic * std::sin(2 * w * td + s.harmonic_phase);
  }
  if (a.level_shift && t >= a.shift_position) v += s.shift;
  if (with_spikes) {
    for (size_t k = 0; k < a.spike_positions.size(); ++k) {
      if (a.spike_positions[k] == t) v += s.spike_heights[k];
    }
  }
  return v;
}

SeriesValues render_curve(const CurveAttributes& a, CounterRng& rng) {
  SeriesValues out;
  out.channels = static_cast<int64_t>(a.curves.size());
  out.length = a.length;
  out.values.resize(static_cast<size_t>(out.channels * out.length));
  out.valid.assign(out.values.size(), 1);
  for (int64_t c = 0; c < out.channels; ++c) {
    const double noise_std = a.curves[static_cast<size_t>(c)].noise_std;
    for (int64_t t = 0; t < a.length; ++t) {
      out.values[static_cast<size_t>(c * a.length + t)] =
          static_cast<float>(clean_value(a, c, t) + noise_std * rng.normal());
    }
  }
  return out;
}

nlohmann::json attributes_to_json(const CurveAttributes& a) {
  nlohmann::json channels = nlohmann::json::array();
  for (const ChannelShape& s : a.curves) {
    channels.push_back({{"scale", s.scale},
                        {"offset", s.offset},
                        {"slope", s.slope},
                        {"amplitude", s.amplitude},
                        {"phase", s.phase},
                        {"harmonic", s.harmonic},
                        {"harmonic_phase", s.harmonic_phase},
                        {"noise_std", s.noise_std},
                        {"shift", s.shift},
                        {"spike_heights", s.spike_heights}});
  }
  return {{"length", a.length},
          {"trend", trend_name(a.trend)},
          {"periodic", a.periodic},
          {"period", a.period},
          {"noise", a.high_noise ? "high" : "low"},
          {"spikes", spike_count_name(a.spikes)},
          {"spike_positions", a.spike_positions},
          {"level_shift", a.level_shift},
          {"shift_position", a.shift_position},
          {"channels", channels}};
}

}  // namespace lmtrain::data::temporal
