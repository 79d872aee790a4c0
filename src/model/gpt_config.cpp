#include "model/gpt_config.h"

#include "core/config.h"
#include "core/error.h"
#include "core/log.h"

namespace lmtrain::model {

GptConfig GptConfig::from_config(const core::Config& cfg, int64_t tokenizer_vocab) {
  GptConfig c;
  c.n_layer = cfg.get_int("model.n_layer");
  c.n_head = cfg.get_int("model.n_head");
  c.n_embd = cfg.get_int("model.n_embd");
  c.vocab_size = cfg.get_int("model.vocab_size");
  c.block_size = cfg.get_int("model.block_size");
  c.dropout = cfg.get_float("model.dropout");
  c.bias = cfg.get_bool("model.bias");
  c.tie_embeddings = cfg.get_bool("model.tie_embeddings");
  c.init_std = cfg.get_float("model.init_std");
  if (c.n_embd % c.n_head != 0) {
    throw UsageError(
        log::format("config key 'model.n_embd' = %lld must be divisible by "
                    "'model.n_head' = %lld",
                    (long long)c.n_embd, (long long)c.n_head));
  }
  if (c.vocab_size == 0) {
    if (tokenizer_vocab <= 0) {
      throw UsageError(
          "config key 'model.vocab_size' is 0 (take it from the tokenizer) but no "
          "tokenizer is available: set model.vocab_size or data.dir");
    }
    c.vocab_size = (tokenizer_vocab + 63) / 64 * 64;
  } else if (tokenizer_vocab > c.vocab_size) {
    throw UsageError(
        log::format("config key 'model.vocab_size' = %lld is smaller than the "
                    "tokenizer's vocabulary (%lld tokens)",
                    (long long)c.vocab_size, (long long)tokenizer_vocab));
  }
  const int64_t seq_len = cfg.get_int("data.seq_len");
  if (seq_len > c.block_size) {
    throw UsageError(
        log::format("config key 'data.seq_len' = %lld exceeds 'model.block_size' = "
                    "%lld (the model has no positions beyond it)",
                    (long long)seq_len, (long long)c.block_size));
  }
  return c;
}

int64_t GptConfig::num_params() const {
  const int64_t C = n_embd, b = bias ? 1 : 0;
  const int64_t per_block = 2 * (C + b * C)            // ln_1, ln_2
                            + (C * 3 * C + b * 3 * C)  // c_attn
                            + (C * C + b * C)          // attn.c_proj
                            + (C * 4 * C + b * 4 * C)  // mlp.c_fc
                            + (4 * C * C + b * C);     // mlp.c_proj
  int64_t n = vocab_size * C + block_size * C + n_layer * per_block + (C + b * C);
  if (!tie_embeddings) n += vocab_size * C;
  return n;
}

std::string GptConfig::describe() const {
  return log::format(
      "gpt2: %lld layers, %lld heads, width %lld, vocab %lld, block %lld, "
      "%.2fM parameters",
      (long long)n_layer, (long long)n_head, (long long)n_embd, (long long)vocab_size,
      (long long)block_size, num_params() / 1e6);
}

}  // namespace lmtrain::model
