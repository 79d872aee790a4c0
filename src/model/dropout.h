// Dropout with a per-thread generator. Training steps split across worker threads would
// otherwise draw from the one global CPU generator in a thread-interleaving order, making runs
// irreproducible; the trainer instead installs a generator seeded from (seed, step, micro-batch,
// slice) around each forward/backward, so dropout masks depend only on the data position.
#pragma once
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace lmtrain::model {

// Installs a CPU generator seeded with `seed` for dropout on this thread while alive.
class ScopedDropoutSeed {
 public:
  explicit ScopedDropoutSeed(uint64_t seed);
  ~ScopedDropoutSeed();
  ScopedDropoutSeed(const ScopedDropoutSeed&) = delete;
  ScopedDropoutSeed& operator=(const ScopedDropoutSeed&) = delete;

 private:
  at::Generator gen_;
  at::Generator* previous_;
};

// Inverted dropout: zeroes elements with probability p and scales the rest by 1/(1-p).
// Uses this thread's installed generator, else the global one.
at::Tensor dropout(const at::Tensor& x, double p);

}  // namespace lmtrain::model
