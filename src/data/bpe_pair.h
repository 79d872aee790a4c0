// A pair of adjacent token ids (a, b) as one 64-bit hash key: what BPE counts (training) and
// looks up (merge ranks when encoding).
#pragma once
#include <cstdint>

namespace lmtrain::data {

inline uint64_t bpe_pair_key(uint32_t a, uint32_t b) {
  return (static_cast<uint64_t>(a) << 32) | b;
}

}  // namespace lmtrain::data
