// Python's `random.Random(seed)` (CPython 3: MT19937 seeded by init_by_array of the seed's
// 32-bit words) and the two calls CORE evaluation makes with it, shuffle() and sample(), so the
// order of a task's items and each item's few-shot examples are nanochat's
// (nanochat/core_eval.py: random.Random(1337).shuffle(data), random.Random(1234 + idx).sample).
#pragma once
#include <array>
#include <cstdint>
#include <vector>

namespace lmtrain::eval {

class PythonRandom {
 public:
  explicit PythonRandom(uint64_t seed);
  uint32_t next_u32();
  // random._randbelow(n) for n >= 1: getrandbits(n.bit_length()) until below n.
  uint64_t below(uint64_t n);
  // random.shuffle(x) of a list of this size: the permutation it applies (x'[i] = x[perm[i]]).
  std::vector<int64_t> shuffle_order(int64_t n);
  // random.sample(range(n), k) as indices into the population.
  std::vector<int64_t> sample(const std::vector<int64_t>& population, int64_t k);

 private:
  uint64_t getrandbits(int k);
  std::array<uint32_t, 624> mt_{};
  int index_ = 624;
};

}  // namespace lmtrain::eval
