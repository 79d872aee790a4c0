// The tiny MoE decoder the MoE unit tests share: 2 layers of width 16, 2 heads, vocabulary 64,
// no biases, every block an MoE layer of `experts` experts (hidden 24 unless given), top-k.
#pragma once
#include <string>

#include "model/gpt_config.h"

namespace lmtrain::model {

inline GptConfig tiny_moe_config(const std::string& mlp, int64_t experts, int64_t k,
                                 int64_t expert_hidden = 24) {
  GptConfig c;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 16;
  c.vocab_size = 64;
  c.block_size = 16;
  c.bias = false;
  c.mlp = mlp;
  c.moe.num_experts = experts;
  c.moe.top_k = k;
  c.moe.expert_hidden = expert_hidden;
  return c;
}

}  // namespace lmtrain::model
