// Shape and options of a decoder-only transformer (the `model` config section, read by
// options/read_model.h): GPT-2
// (LayerNorm, learned positions, GELU) and the Llama / Qwen3 / nanochat family (RMSNorm, RoPE,
// SwiGLU or relu², grouped-query attention, per-head QK-norm, logit soft-capping).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/config_schema.h"
#include "model/decoder_options.h"
#include "model/moe_config.h"
#include "model/rope_params.h"

namespace lmtrain::model {

// Each member starts at its key's schema default (core/config_schema.h).
struct GptConfig {
  int64_t n_layer = core::default_int("model.n_layer");
  int64_t n_head = core::default_int("model.n_head");
  int64_t n_embd = core::default_int("model.n_embd");
  int64_t vocab_size = core::default_int("model.vocab_size");
  int64_t block_size = core::default_int("model.block_size");
  double dropout = core::default_float("model.dropout");
  bool bias = core::default_bool("model.bias");
  bool tie_embeddings = core::default_bool("model.tie_embeddings");
  double init_std = core::default_float("model.init_std");
  // Decoder-family options (GPT-2 defaults; decoder_options.h). See configs/ for the presets.
  Arch arch = core::default_choice<Arch>();  // the family's name for HF I/O
  Norm norm = core::default_choice<Norm>();
  double norm_eps = core::default_float("model.norm_eps");
  PosEncoding pos = core::default_choice<PosEncoding>();
  double rope_theta = core::default_float("model.rope_theta");
  // model.rope_scaling and model.rope_*: scaled RoPE (rope_params.h); original_max is resolved
  // (0 becomes block_size) by options::read_gpt_config.
  RopeScaling rope_scaling;
  MlpKind mlp = core::default_choice<MlpKind>();
  int64_t mlp_hidden = core::default_int("model.mlp_hidden");  // 0: 4 * n_embd
  // 0: n_head (grouped-query attention when fewer)
  int64_t n_kv_head = core::default_int("model.n_kv_head");
  int64_t head_dim_ = core::default_int("model.head_dim");  // 0: n_embd / n_head
  bool qk_norm = core::default_bool("model.qk_norm");       // RMSNorm on each head's q and k
  // Biases on q, k, v even when `bias` is off (Qwen2).
  bool qkv_bias = core::default_bool("model.qkv_bias");
  // > 0: logits = cap * tanh(logits / cap) (nanochat).
  double logit_softcap = core::default_float("model.logit_softcap");
  MoeConfig moe;  // model.moe.*: MoE feed-forward in some or all blocks
  // model.windows: sliding-window attention, tiled over the layers: layer l attends to the last
  // windows[l % size] keys (itself included); 0 = the whole causal context. Empty: no window.
  std::vector<int64_t> windows;
  // nanochat's newer parts (issue 40), each off by default so older checkpoints load as before.
  // norm_weight false: every RMSNorm (blocks, final, QK) without a weight, as nanochat's norm().
  bool norm_weight = core::default_bool("model.norm_weight");
  bool embed_norm = core::default_bool("model.embed_norm");  // RMSNorm right after wte
  // q and k times this after the QK-norm (nanochat: 1.2); 1 = none.
  double qk_scale = core::default_float("model.qk_scale");
  // Per-layer resid_lambdas and x0_lambdas: a block's input is r_l x + x0_l x0 (x0: embedding).
  bool x0_lambdas = core::default_bool("model.x0_lambdas");
  // Value embeddings on alternating layers (the last included), gated per kv head.
  bool value_embeds = core::default_bool("model.value_embeds");
  bool smear = core::default_bool("model.smear");      // previous token's embedding, gated
  bool backout = core::default_bool("model.backout");  // x -= lambda * (residual at n_layer / 2)

  int64_t head_dim() const { return head_dim_ > 0 ? head_dim_ : n_embd / n_head; }
  int64_t kv_heads() const { return n_kv_head > 0 ? n_kv_head : n_head; }
  int64_t hidden_dim() const { return mlp_hidden > 0 ? mlp_hidden : 4 * n_embd; }
  bool learned_pos() const { return pos == PosEncoding::kLearned; }  // else RoPE
  RopeParams rope_params() const { return {rope_theta, rope_scaling}; }
  // Layer l's attention window (0: full causal attention), and whether any layer has one.
  int64_t window(int64_t layer) const {
    return windows.empty() ? 0 : windows[static_cast<size_t>(layer) % windows.size()];
  }
  bool has_value_embed(int64_t layer) const {
    return value_embeds && layer % 2 == (n_layer - 1) % 2;
  }
  bool windowed() const {
    for (int64_t w : windows) {
      if (w > 0) return true;
    }
    return false;
  }
  // window(l) of every layer (what KvCache::bound_to_windows takes).
  std::vector<int64_t> layer_windows() const {
    std::vector<int64_t> out;
    for (int64_t l = 0; l < n_layer; ++l) out.push_back(window(l));
    return out;
  }

  // vocab_size 0 becomes the tokenizer's vocabulary rounded up to a multiple of 64 (which keeps
  // the output GEMM well shaped); a set one smaller than the tokenizer's, or 0 without a
  // tokenizer (tokenizer_vocab 0), is a UsageError naming model.vocab_size.
  void fill_vocab_size(int64_t tokenizer_vocab);
  // Parameter count computed from the shapes (tied embedding counted once), and the count one
  // token uses (MoE: top_k of the routed experts, plus everything else).
  int64_t num_params() const;
  int64_t active_params() const;
  // nanochat's scaling parameters (num_scaling_params: the blocks' weights and the output head),
  // which train.target_param_data_ratio multiplies.
  int64_t scaling_params() const;
  std::string describe() const;
};

// "rope theta 10000" or "rope theta 500000, llama3 x8 from 8192 (1, 4)": the RoPE a model uses,
// for describe() and checkpoint mismatch messages.
std::string describe_rope(const RopeParams& rope);
// "none" or the per-layer windows as model.windows lists them ("0,0,512").
std::string describe_windows(const GptConfig& c);

}  // namespace lmtrain::model
