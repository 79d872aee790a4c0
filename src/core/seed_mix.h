// splitmix64 (Steele, Lea & Flood): the one integer mixer behind lmtrain's own deterministic
// randomness (data order, dropout seeds). Identical on every platform and library version.
#pragma once
#include <cstdint>

namespace lmtrain::core {

// One splitmix64 output for state `z` (the state advances by the golden-ratio increment).
inline uint64_t splitmix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// Stream form: returns the next output and advances `state`.
inline uint64_t splitmix64_next(uint64_t& state) {
  const uint64_t out = splitmix64(state);
  state += 0x9E3779B97F4A7C15ULL;
  return out;
}

// A well-mixed 64-bit seed from several integers.
inline uint64_t mix_seed(uint64_t a, uint64_t b, uint64_t c = 0, uint64_t d = 0) {
  return splitmix64(splitmix64(splitmix64(splitmix64(a) ^ b) ^ c) ^ d);
}

}  // namespace lmtrain::core
