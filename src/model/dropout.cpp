#include "model/dropout.h"

#include <ATen/CPUGeneratorImpl.h>

namespace lmtrain::model {
namespace {
thread_local at::Generator* t_generator = nullptr;

uint64_t splitmix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}
}  // namespace

ScopedDropoutSeed::ScopedDropoutSeed(uint64_t seed)
    : gen_(at::make_generator<at::CPUGeneratorImpl>(seed)), previous_(t_generator) {
  t_generator = &gen_;
}

ScopedDropoutSeed::~ScopedDropoutSeed() { t_generator = previous_; }

at::Tensor dropout(const at::Tensor& x, double p) {
  if (p <= 0) return x;
  auto noise = at::empty_like(x);
  if (t_generator) {
    noise.bernoulli_(1.0 - p, *t_generator);
  } else {
    noise.bernoulli_(1.0 - p);
  }
  noise.div_(1.0 - p);
  return x * noise;
}

uint64_t mix_seed(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  return splitmix(splitmix(splitmix(splitmix(a) ^ b) ^ c) ^ d);
}

}  // namespace lmtrain::model
