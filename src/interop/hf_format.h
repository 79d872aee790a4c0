// Hugging Face transformers <-> lmtrain model mapping, for GPT2LMHeadModel ("gpt2"),
// LlamaForCausalLM ("llama"), Qwen2ForCausalLM ("qwen2"), Qwen3ForCausalLM ("qwen3"),
// Qwen3MoeForCausalLM ("qwen3_moe") and MixtralForCausalLM ("mixtral").
//
// lmtrain keeps GPT-2's names for every family member (model/gpt.h): q, k, v fused into
// c_attn (rows [q; k; v]), SwiGLU's gate and up fused into c_fc (rows [gate; up]), Linear
// weights (out, in). GPT-2's HF checkpoints store Conv1D weights (in, out): transposed here.
//   llama / qwen:  model.embed_tokens -> transformer.wte, model.layers.N.input_layernorm ->
//                  h.N.ln_1, self_attn.{q,k,v}_proj -> attn.c_attn, self_attn.o_proj ->
//                  attn.c_proj, self_attn.{q,k}_norm -> attn.{q,k}_norm,
//                  post_attention_layernorm -> ln_2, mlp.{gate,up}_proj -> mlp.c_fc,
//                  mlp.down_proj -> mlp.c_proj, model.norm -> transformer.ln_f, lm_head.
//   MoE layers:    mlp.gate (Mixtral's Hub files: block_sparse_moe.gate) -> mlp.router;
//                  experts stacked (transformers 5.x in memory: mlp.experts.gate_up_proj
//                  (E, 2I, C), mlp.experts.down_proj (E, C, I)) or one tensor per expert (the
//                  Hub: mlp.experts.E.{gate,up,down}_proj, Mixtral block_sparse_moe.experts.E.
//                  {w1,w3,w2}) -> mlp.experts.c_fc (E, 2I, C) [gate; up], mlp.experts.c_proj.
//                  Export writes the Hub layout.
#pragma once
#include <ATen/core/Tensor.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "model/gpt_config.h"

namespace lmtrain::model::hf {

using Tensors = std::map<std::string, at::Tensor>;

// config.json (transformers 4.x or 5.x style) -> lmtrain config overrides ("model.n_layer" ->
// "12", ...). Throws UsageError for an unsupported model_type or option, naming the key.
std::vector<std::pair<std::string, std::string>> config_overrides(const nlohmann::json& config);

// The Hugging Face family a model exports as: model.arch, except that a Llama or Qwen3 decoder
// with MoE feed-forwards is Mixtral (no QK-norm, e.g. the moe-tiny preset) or Qwen3-MoE
// (QK-norm): the same computation under HF's names. Throws UsageError naming the option when
// the MoE options do not match that family exactly.
GptConfig with_hf_family(GptConfig cfg);
// lmtrain model -> config.json. Throws UsageError when the model has no HF equivalent.
nlohmann::json hf_config(const GptConfig& cfg);

// HF tensors (by HF name) -> lmtrain tensors (by lmtrain name). Every lmtrain parameter must be
// found with the right shape; errors (UsageError) name the tensor. Unused HF buffers (GPT-2's
// attn.bias masks, rotary inv_freq) are ignored; any other leftover tensor is an error.
Tensors import_tensors(const GptConfig& cfg, const Tensors& hf);

// Throw UsageError unless the model is exactly what transformers' GPT2LMHeadModel /
// Llama-Qwen classes compute (interop/hf_config_write.cpp).
void check_gpt2(const GptConfig& cfg);
void check_llama_family(const GptConfig& cfg);

// lmtrain parameters -> HF tensors, in HF names (tied embeddings: no lm_head.weight).
Tensors export_tensors(const GptConfig& cfg, const Tensors& ours);

}  // namespace lmtrain::model::hf
