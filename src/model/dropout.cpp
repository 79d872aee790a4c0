#include "model/dropout.h"

#include <ATen/CPUGeneratorImpl.h>

namespace lmtrain::model {
namespace {
thread_local at::Generator* t_generator = nullptr;

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

}  // namespace lmtrain::model
