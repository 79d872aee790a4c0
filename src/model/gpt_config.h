// Shape and options of a decoder-only transformer (the `model` config section, read by
// options/read_model.h): GPT-2
// (LayerNorm, learned positions, GELU) and the Llama / Qwen3 / nanochat family (RMSNorm, RoPE,
// SwiGLU or relu², grouped-query attention, per-head QK-norm, logit soft-capping).
#pragma once
#include <cstdint>
#include <string>

#include "model/decoder_options.h"
#include "model/moe_config.h"

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
  // Decoder-family options (GPT-2 defaults; decoder_options.h). See configs/ for the presets.
  Arch arch = Arch::kGpt2;  // the family's name for HF I/O
  Norm norm = Norm::kLayerNorm;
  double norm_eps = 1e-5;
  PosEncoding pos = PosEncoding::kLearned;
  double rope_theta = 10000.0;
  MlpKind mlp = MlpKind::kGelu;
  int64_t mlp_hidden = 0;    // 0: 4 * n_embd
  int64_t n_kv_head = 0;     // 0: n_head (grouped-query attention when fewer)
  int64_t head_dim_ = 0;     // 0: n_embd / n_head
  bool qk_norm = false;      // RMSNorm on each head's q and k (Qwen3)
  bool qkv_bias = false;     // biases on q, k, v even when `bias` is off (Qwen2)
  double logit_softcap = 0;  // > 0: logits = cap * tanh(logits / cap) (nanochat)
  MoeConfig moe;             // model.moe.*: MoE feed-forward in some or all blocks

  int64_t head_dim() const { return head_dim_ > 0 ? head_dim_ : n_embd / n_head; }
  int64_t kv_heads() const { return n_kv_head > 0 ? n_kv_head : n_head; }
  int64_t hidden_dim() const { return mlp_hidden > 0 ? mlp_hidden : 4 * n_embd; }
  bool learned_pos() const { return pos == PosEncoding::kLearned; }  // else RoPE

  // vocab_size 0 becomes the tokenizer's vocabulary rounded up to a multiple of 64 (which keeps
  // the output GEMM well shaped); a set one smaller than the tokenizer's, or 0 without a
  // tokenizer (tokenizer_vocab 0), is a UsageError naming model.vocab_size.
  void fill_vocab_size(int64_t tokenizer_vocab);
  // Parameter count computed from the shapes (tied embedding counted once), and the count one
  // token uses (MoE: top_k of the routed experts, plus everything else).
  int64_t num_params() const;
  int64_t active_params() const;
  std::string describe() const;
};

}  // namespace lmtrain::model
