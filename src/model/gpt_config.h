// Shape and options of a GPT-2 family model, read from the `model` config section.
#pragma once
#include <cstdint>
#include <string>

namespace lmtrain::core {
class Config;
}

namespace lmtrain::model {

struct GptConfig {
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 128;
  int64_t vocab_size = 0;
  int64_t block_size = 1024;
  double dropout = 0.0;
  bool bias = true;
  bool tie_embeddings = true;
  double init_std = 0.02;

  int64_t head_dim() const { return n_embd / n_head; }

  // `tokenizer_vocab` fills model.vocab_size=0 (rounded up to a multiple of 64, which keeps
  // the output GEMM well shaped). Throws UsageError naming the key for inconsistent shapes.
  static GptConfig from_config(const core::Config& cfg, int64_t tokenizer_vocab);
  // Parameter count computed from the shapes (tied embedding counted once).
  int64_t num_params() const;
  std::string describe() const;
};

}  // namespace lmtrain::model
