#include "model/dropout.h"

#include <ATen/CPUGeneratorImpl.h>

#ifdef LMTRAIN_CUDA
#include <ATen/cuda/CUDAGeneratorImpl.h>
#endif

#include <string>

#include "core/error.h"

namespace lmtrain::model {
namespace {
thread_local ScopedDropoutSeed* t_scope = nullptr;

at::Generator make_generator(const at::Tensor& like, uint64_t seed) {
  if (like.is_cuda()) {
#ifdef LMTRAIN_CUDA
    auto gen = at::cuda::detail::createCUDAGenerator(like.device().index());
    gen.set_current_seed(seed);
    return gen;
#else
    throw Error("dropout on a CUDA tensor in a build without CUDA");
#endif
  }
  return at::make_generator<at::CPUGeneratorImpl>(seed);
}

}  // namespace

ScopedDropoutSeed::ScopedDropoutSeed(uint64_t seed, DropoutSplit split)
    : seed_(seed), split_(split), previous_(t_scope) {
  if (split.parts < 1 || split.part < 0 || split.part >= split.parts) {
    throw Error("dropout split: part " + std::to_string(split.part) + " of " +
                std::to_string(split.parts));
  }
  t_scope = this;
}

ScopedDropoutSeed::ScopedDropoutSeed(const DropoutRngState& state)
    : seed_(state.seed), split_(state.split), previous_(t_scope) {
  if (state.cpu) cpu_ = state.cpu->clone();
  if (state.cuda) cuda_ = state.cuda->clone();
  t_scope = this;
}

ScopedDropoutSeed::~ScopedDropoutSeed() { t_scope = previous_; }

at::Generator& ScopedDropoutSeed::generator_for(const at::Tensor& like) {
  auto& slot = like.is_cuda() ? cuda_ : cpu_;
  if (!slot) slot = make_generator(like, seed_);
  return *slot;
}

DropoutRngState ScopedDropoutSeed::capture() const {
  DropoutRngState s;
  s.active = true;
  s.seed = seed_;
  s.split = split_;
  if (cpu_) s.cpu = cpu_->clone();
  if (cuda_) s.cuda = cuda_->clone();
  return s;
}

DropoutRngState capture_dropout_rng() { return t_scope ? t_scope->capture() : DropoutRngState{}; }

at::Tensor dropout(const at::Tensor& x, double p) {
  return dropout_part(x, p, 1, t_scope ? t_scope->split() : DropoutSplit{});
}

at::Tensor dropout_part(const at::Tensor& x, double p, int64_t dim, DropoutSplit split) {
  if (p <= 0) return x;
  if (dim < 0) dim += x.dim();
  if (split.parts > 1 && (dim < 0 || dim >= x.dim())) {
    throw Error("dropout under a split needs a dim " + std::to_string(dim) + " to split (got a " +
                std::to_string(x.dim()) + "-d tensor)");
  }
  // The whole's mask: x's shape with `dim` `parts` times as long; this part is a narrow of it.
  auto shape = x.sizes().vec();
  if (split.parts > 1) shape[dim] *= split.parts;
  auto noise = at::empty(shape, x.options());
  if (t_scope) {
    noise.bernoulli_(1.0 - p, t_scope->generator_for(x));
  } else {
    noise.bernoulli_(1.0 - p);
  }
  if (split.parts > 1) noise = noise.narrow(dim, split.part * x.size(dim), x.size(dim));
  noise.div_(1.0 - p);
  return x * noise;
}

}  // namespace lmtrain::model
