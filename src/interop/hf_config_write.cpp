// lmtrain model -> config.json (hf_config), and the checks that a model is exactly a Hugging
// Face family (check_gpt2, check_llama_family, with_hf_family), which the tensor mapping in
// hf_format.cpp applies too. Split from the reading side (hf_config_read.cpp, which describes
// the two config styles written here at once); RoPE scaling and sliding windows are written by
// hf_rope.cpp and hf_window.cpp.
#include "core/config_choice.h"
#include "core/error.h"
#include "interop/hf_format.h"
#include "interop/hf_json.h"
#include "interop/hf_rope_window.h"

namespace lmtrain::model::hf {

using nlohmann::json;

void check_gpt2(const GptConfig& c) {
  if (c.norm != Norm::kLayerNorm || c.pos != PosEncoding::kLearned || c.mlp != MlpKind::kGelu ||
      !c.bias || c.kv_heads() != c.n_head || c.head_dim() * c.n_head != c.n_embd || c.qk_norm ||
      c.logit_softcap > 0 || c.hidden_dim() != 4 * c.n_embd || c.windowed()) {
    throw UsageError(
        "model.arch=gpt2 exports only GPT-2 itself (layernorm, learned positions, gelu, biases, "
        "full heads, 4x MLP, no sliding windows)");
  }
}

void check_llama_family(const GptConfig& c) {
  const std::string& arch = core::to_string(c.arch);
  if (c.norm != Norm::kRmsNorm || c.pos != PosEncoding::kRope || c.mlp != MlpKind::kSwiGlu ||
      c.bias || c.logit_softcap > 0) {
    throw UsageError("model.arch=" + arch +
                     " needs norm=rmsnorm, pos=rope, mlp=swiglu, bias=false and no soft-capping "
                     "to match Hugging Face's " +
                     arch);
  }
  const bool qk_norm = c.arch == Arch::kQwen3 || c.arch == Arch::kQwen3Moe;
  if (qk_norm != c.qk_norm) {
    throw UsageError("model.qk_norm must be " + std::string(qk_norm ? "true" : "false") +
                     " for model.arch=" + arch);
  }
  const bool moe_arch = c.arch == Arch::kQwen3Moe || c.arch == Arch::kMixtral;
  if (moe_arch != c.moe.enabled()) {
    throw UsageError("model.arch=" + arch +
                     (moe_arch ? " needs model.moe.num_experts > 0"
                               : " is dense: set model.arch=qwen3_moe or mixtral for an MoE model "
                                 "(model.moe.num_experts > 0)"));
  }
  if (moe_arch) {
    const auto& m = c.moe;
    std::string why;
    if (m.gate != MoeGate::kSoftmax) why = "model.moe.gate=softmax";
    if (m.capacity_factor > 0) why = "model.moe.capacity_factor=0 (dropless)";
    if (m.shared_experts > 0) why = "model.moe.shared_experts=0";
    if (c.arch == Arch::kMixtral && (m.every != 1 || !m.dense_layers.empty() || !m.renormalize)) {
      why = "model.moe.every=1, no model.moe.dense_layers and model.moe.renormalize=true";
    }
    if (!why.empty()) {
      throw UsageError("model.arch=" + arch + " needs " + why + " to match Hugging Face's " +
                       causal_lm_class(c.arch));
    }
  }
  if ((c.arch == Arch::kQwen2) != c.qkv_bias) {
    throw UsageError("model.qkv_bias must be " +
                     std::string(c.arch == Arch::kQwen2 ? "true" : "false") +
                     " for model.arch=" + arch);
  }
}

GptConfig with_hf_family(GptConfig c) {
  if (!c.moe.enabled() || (c.arch != Arch::kLlama && c.arch != Arch::kQwen3)) return c;
  // Mixtral is Llama attention (no QK-norm) + MoE in every layer with renormalised top-k
  // softmax gates; Qwen3-MoE is Qwen3 attention (QK-norm) + MoE where decoder_sparse_step and
  // mlp_only_layers say. Which one is decided by the attention: the QK-norm weights.
  const std::string from = core::to_string(c.arch);
  c.arch = c.qk_norm ? Arch::kQwen3Moe : Arch::kMixtral;
  try {
    check_llama_family(c);
  } catch (const UsageError& e) {
    throw UsageError(
        "model.arch=" + from + " with MoE layers (model.moe.num_experts=" +
        std::to_string(c.moe.num_experts) + ", model.qk_norm=" + (c.qk_norm ? "true" : "false") +
        ") exports as Hugging Face's " + core::to_string(c.arch) +
        (c.qk_norm ? "" : " (qwen3_moe would need model.qk_norm=true)") + ": " + e.what());
  }
  return c;
}

json hf_config(const GptConfig& c) {
  if (c.arch == Arch::kGpt2) {
    check_gpt2(c);
    return {{"model_type", "gpt2"},
            {"architectures", {"GPT2LMHeadModel"}},
            {"n_layer", c.n_layer},
            {"n_head", c.n_head},
            {"n_embd", c.n_embd},
            {"n_positions", c.block_size},
            {"n_ctx", c.block_size},
            {"vocab_size", c.vocab_size},
            {"layer_norm_epsilon", c.norm_eps},
            {"activation_function", "gelu_new"},
            {"resid_pdrop", 0.0},
            {"embd_pdrop", 0.0},
            {"attn_pdrop", 0.0},
            {"tie_word_embeddings", c.tie_embeddings},
            {"dtype", "float32"},
            {"torch_dtype", "float32"}};
  }
  if (c.arch == Arch::kNanochat) {
    throw UsageError("model.arch=" + core::to_string(c.arch) +
                     " has no Hugging Face transformers equivalent (export supports gpt2, llama, "
                     "mistral, qwen2, qwen3, qwen3_moe, mixtral)");
  }
  check_llama_family(c);
  // Both config styles at once, with equal values, so that transformers 4.x (rope_theta,
  // rope_scaling, torch_dtype) and 5.x (rope_parameters, dtype, layer_types) read one model.
  json j = {{"model_type", core::to_string(c.arch)},
            {"architectures", {causal_lm_class(c.arch)}},
            {"hidden_size", c.n_embd},
            {"intermediate_size", c.hidden_dim()},
            {"num_hidden_layers", c.n_layer},
            {"num_attention_heads", c.n_head},
            {"num_key_value_heads", c.kv_heads()},
            {"head_dim", c.head_dim()},
            {"hidden_act", "silu"},
            {"rms_norm_eps", c.norm_eps},
            {"max_position_embeddings", c.block_size},
            {"vocab_size", c.vocab_size},
            {"tie_word_embeddings", c.tie_embeddings},
            {"attention_dropout", 0.0},
            {"dtype", "float32"},
            {"torch_dtype", "float32"}};
  write_rope(j, c);
  if (c.arch != Arch::kQwen2 && c.arch != Arch::kMistral) j["attention_bias"] = false;
  if (c.arch == Arch::kLlama) j["mlp_bias"] = false;
  if (c.arch == Arch::kQwen3Moe) {
    j["num_experts"] = c.moe.num_experts;
    j["num_experts_per_tok"] = c.moe.top_k;
    j["moe_intermediate_size"] = c.moe.expert_hidden;
    j["decoder_sparse_step"] = c.moe.every;
    j["mlp_only_layers"] = c.moe.dense_layers;
    j["norm_topk_prob"] = c.moe.renormalize;
    j["router_aux_loss_coef"] = c.moe.aux_loss_coef;
    j["output_router_logits"] = false;
  }
  if (c.arch == Arch::kMixtral) {
    j["intermediate_size"] = c.moe.expert_hidden;
    j["num_local_experts"] = c.moe.num_experts;
    j["num_experts_per_tok"] = c.moe.top_k;
    j["router_aux_loss_coef"] = c.moe.aux_loss_coef;
    j["router_jitter_noise"] = 0.0;
    j["output_router_logits"] = false;
  }
  write_windows(j, c);
  return j;
}

}  // namespace lmtrain::model::hf
