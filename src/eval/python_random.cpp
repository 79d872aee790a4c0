#include "eval/python_random.h"

#include <cmath>
#include <set>

#include "core/error.h"

namespace lmtrain::eval {
namespace {

void init_genrand(std::array<uint32_t, 624>& mt, uint32_t s) {
  mt[0] = s;
  for (uint32_t i = 1; i < 624; ++i) mt[i] = 1812433253u * (mt[i - 1] ^ (mt[i - 1] >> 30)) + i;
}

}  // namespace

PythonRandom::PythonRandom(uint64_t seed) {
  // init_by_array with the seed's 32-bit words, least significant first ([0] for 0).
  std::vector<uint32_t> key;
  for (uint64_t s = seed; s != 0; s >>= 32) key.push_back(static_cast<uint32_t>(s));
  if (key.empty()) key.push_back(0);
  init_genrand(mt_, 19650218u);
  uint32_t i = 1, j = 0;
  for (size_t k = std::max<size_t>(624, key.size()); k > 0; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1664525u)) + key[j] + j;
    ++i;
    ++j;
    if (i >= 624) {
      mt_[0] = mt_[623];
      i = 1;
    }
    if (j >= key.size()) j = 0;
  }
  for (size_t k = 623; k > 0; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1566083941u)) - i;
    ++i;
    if (i >= 624) {
      mt_[0] = mt_[623];
      i = 1;
    }
  }
  mt_[0] = 0x80000000u;
  index_ = 624;
}

uint32_t PythonRandom::next_u32() {
  if (index_ >= 624) {
    for (int k = 0; k < 624; ++k) {
      const uint32_t y = (mt_[k] & 0x80000000u) | (mt_[(k + 1) % 624] & 0x7fffffffu);
      mt_[k] = mt_[(k + 397) % 624] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
    }
    index_ = 0;
  }
  uint32_t y = mt_[index_++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

uint64_t PythonRandom::getrandbits(int k) {
  if (k <= 32) return next_u32() >> (32 - k);
  // Words least significant first, the last one cut to the bits left (CPython's order).
  uint64_t r = 0;
  int shift = 0;
  for (int left = k; left > 0; left -= 32, shift += 32) {
    uint32_t w = next_u32();
    if (left < 32) w >>= (32 - left);
    r |= static_cast<uint64_t>(w) << shift;
  }
  return r;
}

uint64_t PythonRandom::below(uint64_t n) {
  if (n == 0) throw Error("PythonRandom::below(0)");
  int k = 0;
  while ((n >> k) != 0) ++k;  // n.bit_length()
  uint64_t r = getrandbits(k);
  while (r >= n) r = getrandbits(k);
  return r;
}

std::vector<int64_t> PythonRandom::shuffle_order(int64_t n) {
  std::vector<int64_t> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = i;
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(below(static_cast<uint64_t>(i) + 1));
    std::swap(x[static_cast<size_t>(i)], x[static_cast<size_t>(j)]);
  }
  return x;
}

std::vector<int64_t> PythonRandom::sample(const std::vector<int64_t>& population, int64_t k) {
  const auto n = static_cast<int64_t>(population.size());
  if (k < 0 || k > n) throw Error("sample larger than population or is negative");
  std::vector<int64_t> result(static_cast<size_t>(k));
  int64_t setsize = 21;  // as CPython: a list copy for small populations, else a set of picks
  if (k > 5)
    setsize += static_cast<int64_t>(std::pow(4, std::ceil(std::log(3.0 * k) / std::log(4.0))));
  if (n <= setsize) {
    std::vector<int64_t> pool = population;
    for (int64_t i = 0; i < k; ++i) {
      const auto j = static_cast<int64_t>(below(static_cast<uint64_t>(n - i)));
      result[static_cast<size_t>(i)] = pool[static_cast<size_t>(j)];
      pool[static_cast<size_t>(j)] = pool[static_cast<size_t>(n - i - 1)];
    }
  } else {
    std::set<int64_t> selected;
    for (int64_t i = 0; i < k; ++i) {
      auto j = static_cast<int64_t>(below(static_cast<uint64_t>(n)));
      while (selected.count(j)) j = static_cast<int64_t>(below(static_cast<uint64_t>(n)));
      selected.insert(j);
      result[static_cast<size_t>(i)] = population[static_cast<size_t>(j)];
    }
  }
  return result;
}

}  // namespace lmtrain::eval
