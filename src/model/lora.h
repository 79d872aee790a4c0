// LoRA fine-tuning (`lora.*`): low-rank adapters on chosen linear layers of a frozen base.
// apply_lora freezes every parameter of the model (tag trainable=false: no gradient, optimizer
// state, sync or checkpoint copy) but those lora.unfreeze names (norms, embeddings, head), and
// attaches LoraAdapters (model/lora_adapter.h):
//   q, k, v   rows of the fused attn.c_attn ([q; k; v], (n_head + 2 n_kv_head) * head_dim rows):
//             one adapter per target writing only its rows (PEFT's q_proj / k_proj / v_proj)
//   o         attn.c_proj
//   mlp_in    mlp.c_fc; for SwiGLU one adapter for the gate rows and one for the up rows
//             (PEFT's gate_proj / up_proj)
//   mlp_out   mlp.c_proj
//   head      lm_head (untied embeddings only)
// Adapter parameter names: "<linear>.lora_<part>.lora_A" (rank, in) and ".lora_B" (rows, rank),
// <part> one of q k v (c_attn), gate up (SwiGLU c_fc), or "" for a whole layer ("<linear>.lora").
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "core/config_schema.h"
#include "model/gpt.h"

namespace lmtrain::model {

enum class LoraTarget { kQ, kK, kV, kO, kMlpIn, kMlpOut, kHead };

// Parses lora.targets ("q,v" or "q, k, v, o, mlp_in, mlp_out, head"); errors name the key.
std::vector<LoraTarget> parse_lora_targets(const std::string& text);

// Each member starts at its key's schema default (core/config_schema.h).
struct LoraOptions {
  int64_t rank = core::default_int("lora.rank");  // 0 = off
  double alpha = core::default_float("lora.alpha");
  double dropout = core::default_float("lora.dropout");
  // optim.weight_decay on the adapters (peft + HF Trainer: none by default).
  bool decay = core::default_bool("lora.decay");
  std::vector<LoraTarget> targets = parse_lora_targets(core::default_string("lora.targets"));
  // lora.unfreeze: parameter groups trained fully beside the adapters (none by default).
  bool unfreeze_norms = false, unfreeze_embeddings = false, unfreeze_head = false;
  bool enabled() const { return rank > 0; }
  double scaling() const { return alpha / static_cast<double>(rank); }
  bool targets_contain(LoraTarget t) const;
};

// Parses lora.unfreeze ("norms, embeddings, head") into o's unfreeze_* flags; errors name the key.
void parse_lora_unfreeze(const std::string& text, LoraOptions& o);
std::string lora_target_name(LoraTarget t);
// "q,v": the targets' names, comma-separated, as lora.targets spells them.
std::string lora_target_list(const std::vector<LoraTarget>& targets);

// Freezes the model and attaches the adapters. init: A ~ kaiming-uniform(a=sqrt(5)) from the
// global generator (seed it first), B = 0; otherwise zeros (about to be loaded).
void apply_lora(GptImpl& model, const LoraOptions& opts, bool init);

// An adapter with where it sits: `linear` is the adapted layer's name ("transformer.h.0.attn.
// c_attn"), `part` "q", "k", "v", "gate", "up" or "" (the whole layer).
struct LoraSite {
  std::string linear, part;
  const LoraAdapterImpl* adapter;
  const LinearImpl* layer;
};
std::vector<LoraSite> lora_sites(const GptImpl& model);

// The model's weights with every adapter folded in (W[rows] += scaling * B A), under the names of
// the same model without LoRA: what `lmtrain lora merge` writes.
std::vector<std::pair<std::string, torch::Tensor>> merged_state_tensors(const GptImpl& model);

}  // namespace lmtrain::model
