// Dropout with per-thread generators. Training steps split across worker threads would
// otherwise draw from the one global generator in a thread-interleaving order, making runs
// irreproducible; the trainer instead installs generators seeded from (seed, step, micro-batch,
// slice) around each forward/backward, so dropout masks depend only on the data position — on
// CPU and on CUDA alike, which is also why checkpoints need no RNG state for dropout.
#pragma once
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

namespace lmtrain::model {

// Tensor parallelism (parallel/tensor_parallel_plan.h): every activation dropout sees on this
// rank is part `part` of `parts` equal pieces, along dim 1, of what one process holds: the
// sequence of (B, T, C) residual activations, the heads of (B, H, Tq, Tk) attention weights.
// Masks are then drawn for the whole and this part kept, so the split run drops exactly the
// elements one process drops (and equals it), for `parts` times the cost of drawing.
struct DropoutSplit {
  int parts = 1;
  int part = 0;
};

// The generators of the innermost scope, copied in their current state (activation
// checkpointing replays a block's masks from it). `active` is false outside any scope.
struct DropoutRngState {
  bool active = false;
  uint64_t seed = 0;
  DropoutSplit split;
  std::optional<at::Generator> cpu, cuda;  // made lazily on first use per device type
};

// Installs generators seeded with `seed` for dropout on this thread while alive: one per
// device type, made on first use. `split`: how this rank's activations cut one process's.
class ScopedDropoutSeed {
 public:
  explicit ScopedDropoutSeed(uint64_t seed, DropoutSplit split = {});
  // Installs copies of a captured state, so the same masks come out again.
  explicit ScopedDropoutSeed(const DropoutRngState& state);
  ~ScopedDropoutSeed();
  ScopedDropoutSeed(const ScopedDropoutSeed&) = delete;
  ScopedDropoutSeed& operator=(const ScopedDropoutSeed&) = delete;

  at::Generator& generator_for(const at::Tensor& like);
  DropoutRngState capture() const;
  const DropoutSplit& split() const { return split_; }

 private:
  uint64_t seed_;
  DropoutSplit split_;
  std::optional<at::Generator> cpu_, cuda_;
  ScopedDropoutSeed* previous_;
};

// This thread's dropout generators in their current state.
DropoutRngState capture_dropout_rng();

// Inverted dropout: zeroes elements with probability p and scales the rest by 1/(1-p).
// Uses this thread's installed generators, else the global ones, and the scope's split: x is
// then part of a whole along dim 1 (DropoutSplit).
at::Tensor dropout(const at::Tensor& x, double p);

// Inverted dropout of x as part `split.part` of `split.parts` equal pieces along `dim` of a
// whole, whatever the scope's split: the whole's mask is drawn from this thread's generators
// and this part kept. For tensor parallelism's LoRA adapters (parallel/tp_lora.h), whose
// inputs are the whole gathered sequence ({1, 0}) or this rank's input features (dim -1).
at::Tensor dropout_part(const at::Tensor& x, double p, int64_t dim, DropoutSplit split);

}  // namespace lmtrain::model
