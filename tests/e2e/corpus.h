// A small synthetic corpus with learnable structure, and helpers to run the binary on it.
#pragma once
#include <string>

namespace lmtrain::testing {

// Writes `docs` documents of templated English-like sentences into dir/corpus.txt, separated
// by lines of "%", deterministically from `seed`. Returns the file path.
std::string write_synthetic_corpus(const std::string& dir, int docs, unsigned seed);

// Runs `lmtrain prepare` on it into dir/data (vocab 384); returns the data dir. Fails the
// calling test via an exception when prepare fails.
std::string prepare_synthetic_data(const std::string& dir);

// Flags for a tiny, fast model: 2 layers, width 32, seq_len 32, micro-batch 8.
std::string tiny_train_flags();

// tiny_train_flags() with both layers MoE: 4 SwiGLU experts of width 32, top-2, dropless; the
// balancing bias and the z-loss on. The Switch aux loss is off: computed per micro-batch and
// rank (as in Megatron and HF), it is not world-size invariant by design.
std::string tiny_moe_flags();

}  // namespace lmtrain::testing
