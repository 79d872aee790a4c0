// The tiny decoders the unit tests build (random weights, CPU): the one hand-built GptConfig
// that model, optimizer, objective and training tests start from, the Llama / Qwen family on
// top of it, and the tiny MoE decoder of the MoE tests.
#pragma once
#include <cstdint>

#include "model/gpt_config.h"

namespace lmtrain::model {

// GPT-2 style (LayerNorm, learned positions, GELU, biases, tied embeddings): 2 layers, 2 heads.
inline GptConfig tiny_gpt_config(int64_t n_embd, int64_t vocab_size, int64_t block_size) {
  GptConfig c;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = n_embd;
  c.vocab_size = vocab_size;
  c.block_size = block_size;
  return c;
}

// `c` as a member of the Llama / Qwen family named `arch`: RMSNorm, RoPE, SwiGLU, no biases, and
// QK-norm for the Qwen3 ones.
inline GptConfig with_llama_family(GptConfig c, Arch arch) {
  c.arch = arch;
  c.norm = Norm::kRmsNorm;
  c.pos = PosEncoding::kRope;
  c.mlp = MlpKind::kSwiGlu;
  c.bias = false;
  c.qk_norm = arch == Arch::kQwen3 || arch == Arch::kQwen3Moe;
  return c;
}

// The MoE unit tests' decoder: width 16, vocabulary 64, no biases, every block an MoE layer of
// `experts` experts (hidden 24 unless given), top-k.
inline GptConfig tiny_moe_config(MlpKind mlp, int64_t experts, int64_t k,
                                 int64_t expert_hidden = 24) {
  GptConfig c = tiny_gpt_config(16, 64, 16);
  c.bias = false;
  c.mlp = mlp;
  c.moe.num_experts = experts;
  c.moe.top_k = k;
  c.moe.expert_hidden = expert_hidden;
  return c;
}

}  // namespace lmtrain::model
