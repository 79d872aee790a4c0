// The synthetic curves' randomness (issue 26): a counter-based stream per sample, seeded from
// (seed, sample index) by splitmix64 (core/seed_mix.h), with its own uniform, integer and
// Box-Muller normal draws. No std:: distribution is used, because their algorithms differ
// between standard libraries: a sample is a function of (seed, index) alone, the same on every
// thread, in every order, in `temporal-data`'s cache and in online generation.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/seed_mix.h"

namespace lmtrain::data::temporal {

class CounterRng {
 public:
  // `stream` separates independent uses of one (seed, index), e.g. the generator's version.
  CounterRng(uint64_t seed, uint64_t index, uint64_t stream)
      : state_(core::mix_seed(seed, index, stream)) {}

  uint64_t next_u64() { return core::splitmix64_next(state_); }

  // Uniform in [0, 1): the top 53 bits, exact in a double.
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }

  // Uniform integer in [0, n), n >= 1 (multiply-shift: a bias below n / 2^64, no rejection
  // loop, so every draw consumes exactly one output).
  int64_t below(int64_t n) {
    const unsigned __int128 p =
        static_cast<unsigned __int128>(next_u64()) * static_cast<uint64_t>(n);
    return static_cast<int64_t>(p >> 64);
  }
  // Uniform integer in [lo, hi] (inclusive).
  int64_t between(int64_t lo, int64_t hi) { return lo + below(hi - lo + 1); }

  bool coin() { return (next_u64() >> 63) != 0; }
  double sign() { return coin() ? 1.0 : -1.0; }

  // Standard normal by Box-Muller (one of the pair; two uniforms per draw).
  double normal() {
    const double u1 = 1.0 - uniform();  // (0, 1]: log stays finite
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t state_;
};

}  // namespace lmtrain::data::temporal
