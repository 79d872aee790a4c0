// config.json <-> lmtrain model config, for the families of interop/hf_format.h.
//
// Real checkpoints come in two config styles, and both must give the same model:
//   transformers 4.x: top-level rope_theta, rope_scaling (null or {type|rope_type, ...}),
//                     torch_dtype; Qwen2/3 derive sliding layers from use_sliding_window,
//                     sliding_window and max_window_layers.
//   transformers 5.x: rope_parameters {rope_theta, rope_type, ...}, dtype, layer_types
//                     (full_attention | sliding_attention per layer).
// RoPE scaling and sliding windows map onto model.rope_* and model.windows (hf_rope_window.h).
// Anything that would change the computation and that lmtrain does not implement (longrope,
// a partial rotary dimension, Qwen3-MoE's windows, extra biases, GPT-2 attention variants,
// quantized weights) is a UsageError naming the key: never silently different logits.
#include <algorithm>
#include <cmath>
#include <set>
#include <type_traits>

#include "core/config_choice.h"
#include "core/error.h"
#include "core/log.h"
#include "interop/hf_format.h"
#include "interop/hf_json.h"
#include "interop/hf_rope_window.h"

namespace lmtrain::model::hf {
namespace {

using nlohmann::json;

// A size (width, heads, layers, context, vocabulary): a positive integer small enough that the
// arithmetic on it (C / H, 4 * C) cannot divide by zero or overflow. Found by fuzz/: a config.json
// with num_attention_heads 0 crashed `lmtrain import hf` with SIGFPE.
int64_t size_or(const json& j, const char* key, int64_t fallback) {
  constexpr int64_t kMax = int64_t{1} << 31;
  const auto v = get_or<int64_t>(j, key, fallback);
  if (v < 1 || v > kMax) {
    throw UsageError("config.json: " + std::string(key) + " must be an integer in [1, " +
                     std::to_string(kMax) + "], got " + std::to_string(v));
  }
  return v;
}

std::string causal_lm_class(Arch arch) {
  switch (arch) {
    case Arch::kGpt2:
      return "GPT2LMHeadModel";
    case Arch::kLlama:
      return "LlamaForCausalLM";
    case Arch::kQwen2:
      return "Qwen2ForCausalLM";
    case Arch::kQwen3Moe:
      return "Qwen3MoeForCausalLM";
    case Arch::kMixtral:
      return "MixtralForCausalLM";
    case Arch::kMistral:
      return "MistralForCausalLM";
    case Arch::kQwen3:
    case Arch::kNanochat:
      break;
  }
  return "Qwen3ForCausalLM";
}

// `architectures` (when present) must be the family's causal-LM class: a classifier or another
// head on the same backbone has weights and outputs lmtrain does not model.
void check_architectures(const json& j, Arch type) {
  if (!has(j, "architectures")) return;
  const std::string want = causal_lm_class(type);
  for (const auto& a : j["architectures"]) {
    const std::string name = a.is_string() ? a.get<std::string>() : a.dump();
    if (name != want && !(type == Arch::kGpt2 && name == "GPT2Model")) {
      throw UsageError("config.json: architectures '" + name +
                       "' is not supported for model_type " + core::to_string(type) +
                       " (supported: " + want + ")");
    }
  }
}

// Qwen3-MoE's sliding-window attention (every layer, when use_sliding_window and
// sliding_window are set and the window is shorter than the context) is not imported; the
// layer counting follows Qwen2's for the message.
void check_sliding_window(const json& j, int64_t n_layer, int64_t context) {
  // The sliding layers are counted, not listed: num_hidden_layers is not range-checked yet
  // (config.json may say 1e9), and nothing here may allocate in proportion to it.
  int64_t sliding = 0, first_sliding = -1;
  if (has(j, "layer_types")) {
    const json& lt = j["layer_types"];
    if (!lt.is_array() || static_cast<int64_t>(lt.size()) != n_layer) {
      throw UsageError("config.json: layer_types must list num_hidden_layers entries");
    }
    for (size_t i = 0; i < lt.size(); ++i) {
      const std::string t = lt[i].is_string() ? lt[i].get<std::string>() : lt[i].dump();
      if (t == "sliding_attention") {
        if (sliding++ == 0) first_sliding = static_cast<int64_t>(i);
      } else if (t != "full_attention") {
        throw UsageError("config.json: layer_types[" + std::to_string(i) + "] '" + t +
                         "' is not supported (full_attention only)");
      }
    }
  } else {
    first_sliding = std::max<int64_t>(get_or<int64_t>(j, "max_window_layers", n_layer), 0);
    sliding = std::max<int64_t>(n_layer - first_sliding, 0);
  }
  if (!get_or<bool>(j, "use_sliding_window", false) || !has(j, "sliding_window")) return;
  const auto window = get_or<int64_t>(j, "sliding_window", 0);
  if (sliding == 0 || window >= context) return;
  throw UsageError(
      "config.json: sliding_window=" + num(window) + " with use_sliding_window=true (" +
      std::to_string(sliding) + " of " + std::to_string(n_layer) + " layers, first " +
      std::to_string(first_sliding) +
      ") is not supported for qwen3_moe (lmtrain imports the sliding windows of mistral, "
      "mixtral, qwen2 and qwen3)");
}

void reject_true(const json& j, const char* key, const std::string& why) {
  if (get_or<bool>(j, key, false)) {
    throw UsageError("config.json: " + std::string(key) + "=true is not supported (" + why + ")");
  }
}

std::vector<std::pair<std::string, std::string>> gpt2_overrides(const json& j) {
  const auto C = size_or(j, "n_embd", 768);
  const auto act = get_or<std::string>(j, "activation_function", "gelu_new");
  if (act != "gelu_new" && act != "gelu_pytorch_tanh") {
    throw UsageError("config.json: GPT-2 activation_function '" + act +
                     "' is not supported (gelu_new)");
  }
  if (!get_or<bool>(j, "scale_attn_weights", true)) {
    throw UsageError("config.json: scale_attn_weights=false is not supported");
  }
  reject_true(j, "scale_attn_by_inverse_layer_idx", "attention scaled by 1/layer");
  return {{"model.arch", "gpt2"},
          {"model.n_layer", num(size_or(j, "n_layer", 12))},
          {"model.n_head", num(size_or(j, "n_head", 12))},
          {"model.n_embd", num(C)},
          {"model.block_size", num(get_or<int64_t>(j, "n_positions", 1024))},
          {"model.vocab_size", num(get_or<int64_t>(j, "vocab_size", 50257))},
          {"model.norm_eps", num(get_or<double>(j, "layer_norm_epsilon", 1e-5))},
          {"model.mlp_hidden", num(size_or(j, "n_inner", 4 * C))},
          {"model.tie_embeddings", get_or<bool>(j, "tie_word_embeddings", true) ? "true" : "false"},
          {"model.bias", "true"}};
}

Overrides llama_overrides(const json& j, Arch type) {
  const auto C = size_or(j, "hidden_size", 4096);
  const auto H = size_or(j, "num_attention_heads", 32);
  const auto L = size_or(j, "num_hidden_layers", 32);
  const auto P = size_or(j, "max_position_embeddings", 2048);
  const auto act = get_or<std::string>(j, "hidden_act", "silu");
  if (act != "silu" && act != "swish") {
    throw UsageError("config.json: hidden_act '" + act + "' is not supported (silu)");
  }
  reject_true(j, "mlp_bias", "MLP without biases only");
  // Qwen2 always has q/k/v biases (and reads no attention_bias); Llama and Qwen3 have an
  // attention_bias switch that would add biases lmtrain does not have (o_proj too).
  if (type != Arch::kQwen2) reject_true(j, "attention_bias", "attention without biases only");
  if (type == Arch::kQwen3Moe) check_sliding_window(j, L, P);
  Overrides out = {
      {"model.arch", core::to_string(type)},
      {"model.n_layer", num(L)},
      {"model.n_head", num(H)},
      {"model.n_kv_head", num(get_or<int64_t>(j, "num_key_value_heads", H))},
      {"model.n_embd", num(C)},
      {"model.head_dim", num(get_or<int64_t>(j, "head_dim", C / H))},
      {"model.mlp", "swiglu"},
      {"model.mlp_hidden", num(size_or(j, "intermediate_size", 4 * C))},
      {"model.norm", "rmsnorm"},
      {"model.norm_eps", num(get_or<double>(j, "rms_norm_eps", 1e-6))},
      {"model.pos", "rope"},
      {"model.qk_norm", type == Arch::kQwen3 || type == Arch::kQwen3Moe ? "true" : "false"},
      {"model.qkv_bias", type == Arch::kQwen2 ? "true" : "false"},
      {"model.bias", "false"},
      {"model.block_size", num(P)},
      {"model.vocab_size", num(get_or<int64_t>(j, "vocab_size", 32000))},
      {"model.tie_embeddings", get_or<bool>(j, "tie_word_embeddings", false) ? "true" : "false"}};
  for (auto& kv : rope_overrides(j, P)) out.push_back(kv);
  for (auto& kv : window_overrides(j, type, L, P)) out.push_back(kv);
  return out;
}

std::string list_text(const json& j, const char* key) {
  if (!has(j, key)) return "";
  if (!j[key].is_array()) throw UsageError("config.json: " + std::string(key) + " is not a list");
  std::string out;
  for (const auto& v : j[key]) out += (out.empty() ? "" : ",") + num(v.get<int64_t>());
  return out;
}

// Qwen3-MoE: Qwen3 attention; MoE in layers (l + 1) % decoder_sparse_step == 0 outside
// mlp_only_layers, dense SwiGLU of intermediate_size elsewhere. Mixtral: Llama attention, every
// layer MoE with experts of intermediate_size, gates always renormalised. Both route with a
// softmax over fp32 logits, dropless (HF has no capacity).
std::vector<std::pair<std::string, std::string>> moe_overrides(const json& j, Arch type) {
  const bool mixtral = type == Arch::kMixtral;
  // transformers 5.x writes num_local_experts for both (Qwen3-MoE's num_experts is an alias).
  const auto experts = has(j, "num_local_experts") ? get_or<int64_t>(j, "num_local_experts", 8)
                                                   : get_or<int64_t>(j, "num_experts", 8);
  const auto hidden = get_or<int64_t>(j, mixtral ? "intermediate_size" : "moe_intermediate_size",
                                      mixtral ? 14336 : 768);
  // router_jitter_noise (Mixtral) multiplies inputs by noise in training only: logits unaffected.
  return {{"model.moe.num_experts", num(experts)},
          {"model.moe.top_k", num(get_or<int64_t>(j, "num_experts_per_tok", 2))},
          {"model.moe.expert_hidden", num(hidden)},
          {"model.moe.shared_experts", "0"},
          {"model.moe.every", mixtral ? "1" : num(get_or<int64_t>(j, "decoder_sparse_step", 1))},
          {"model.moe.dense_layers", mixtral ? "" : list_text(j, "mlp_only_layers")},
          {"model.moe.gate", "softmax"},
          {"model.moe.renormalize",
           mixtral || get_or<bool>(j, "norm_topk_prob", false) ? "true" : "false"},
          {"model.moe.capacity_factor", "0"},
          {"model.moe.bias_update_rate", "0"},
          {"model.moe.aux_loss_coef", num(get_or<double>(j, "router_aux_loss_coef", 0.001))}};
}

}  // namespace

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

std::vector<std::pair<std::string, std::string>> config_overrides(const json& j) {
  const std::string type = get_or<std::string>(j, "model_type", "");
  const std::set<std::string> supported = {"gpt2",      "llama",   "qwen2",  "qwen3",
                                           "qwen3_moe", "mixtral", "mistral"};
  if (!supported.count(type)) {
    throw UsageError("config.json: model_type '" + type +
                     "' is not supported (supported: gpt2, llama, mistral, qwen2, qwen3, "
                     "qwen3_moe, mixtral)");
  }
  const auto arch = core::parse_choice<Arch>(type, "config.json: model_type");
  check_architectures(j, arch);
  if (has(j, "quantization_config")) {
    throw UsageError("config.json: quantization_config is not supported (fp32/bf16/fp16 only)");
  }
  if (arch == Arch::kGpt2) return gpt2_overrides(j);
  auto overrides = llama_overrides(j, arch);
  if (arch == Arch::kQwen3Moe || arch == Arch::kMixtral) {
    for (auto& kv : moe_overrides(j, arch)) overrides.push_back(kv);
  } else {
    overrides.emplace_back("model.moe.num_experts", "0");
  }
  return overrides;
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

// RoPE scaling and sliding windows (interop/hf_rope_window.h).

namespace {

// The rope_type of a rope_scaling / rope_parameters object ("type" in older 4.x configs).
std::string rope_type_of(const json& r, const char* key) {
  if (!r.is_object()) throw UsageError("config.json: " + std::string(key) + " is not an object");
  if (has(r, "rope_type")) return get_or<std::string>(r, "rope_type", "default");
  if (has(r, "type")) return get_or<std::string>(r, "type", "default");
  return "default";
}

// The object that holds the scaling: rope_scaling when set (4.x reads only it; 5.x's
// convert_rope_params_to_dict lets it replace rope_parameters), else rope_parameters.
const json* scaling_object(const json& j, const char** key) {
  const bool top = has(j, "rope_scaling"), nested = has(j, "rope_parameters");
  if (top && nested) {
    const auto a = rope_type_of(j["rope_scaling"], "rope_scaling");
    const auto b = rope_type_of(j["rope_parameters"], "rope_parameters");
    if (a != b && b != "default") {
      throw UsageError("config.json: rope_scaling.rope_type '" + a +
                       "' and rope_parameters.rope_type '" + b + "' disagree");
    }
  }
  *key = top ? "rope_scaling" : "rope_parameters";
  return top ? &j["rope_scaling"] : nested ? &j["rope_parameters"] : nullptr;
}

// RoPE base: 5.x's rope_parameters.rope_theta, else 4.x's top-level rope_theta, else the
// families' default 10000. Both present and different is ambiguous (4.x reads one, 5.x the
// other), so it is an error.
double rope_theta(const json& j) {
  const bool top = has(j, "rope_theta");
  const bool nested = has(j, "rope_parameters") && j["rope_parameters"].is_object() &&
                      has(j["rope_parameters"], "rope_theta");
  const double a = top ? get_or<double>(j, "rope_theta", 0) : 0;
  const double b = nested ? get_or<double>(j["rope_parameters"], "rope_theta", 0) : 0;
  if (top && nested && a != b) {
    throw UsageError("config.json: rope_theta " + num(a) + " and rope_parameters.rope_theta " +
                     num(b) + " disagree");
  }
  return nested ? b : top ? a : 10000.0;
}

// A factor >= 1 (HF warns below 1; lmtrain's model.rope_factor cannot hold it).
double factor_of(const json& r, const std::string& where, double fallback) {
  const double f = get_or<double>(r, "factor", fallback);
  if (!(f >= 1.0)) {
    throw UsageError("config.json: " + where + ".factor must be a number >= 1, got " + num(f));
  }
  return f;
}

// YaRN's mscale: HF get_mscale(scale, m) = 0.1 m ln(scale) + 1 (1 for scale <= 1).
double yarn_mscale(double scale, double m) {
  return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0;
}

}  // namespace

Overrides rope_overrides(const json& j, int64_t max_pos) {
  if (get_or<double>(j, "partial_rotary_factor", 1.0) != 1.0) {
    throw UsageError("config.json: partial_rotary_factor is not supported (full rotary dimension)");
  }
  const char* key = nullptr;
  const json* r = scaling_object(j, &key);
  const std::string type = r ? rope_type_of(*r, key) : "default";
  const std::string where = key ? key : "rope_parameters";
  if (r && type == "default" && std::string(key) == "rope_parameters" && !has(*r, "rope_theta") &&
      !r->empty() && !has(*r, "rope_type") && !has(*r, "type")) {
    throw UsageError("config.json: rope_parameters " + r->dump() +
                     " is not supported (per-layer-type RoPE; one RoPE for all layers only)");
  }
  if (r && get_or<double>(*r, "partial_rotary_factor", 1.0) != 1.0) {
    throw UsageError("config.json: " + where +
                     ".partial_rotary_factor is not supported (full rotary dimension only)");
  }
  Overrides out = {{"model.rope_theta", num(rope_theta(j))}};
  // Pretraining context of llama3 / yarn (standardize_rope_params: the top-level key first, as
  // Phi3 writes it, then the object's, then max_position_embeddings).
  auto original = [&]() -> int64_t {
    int64_t v = has(j, "original_max_position_embeddings")
                    ? get_or<int64_t>(j, "original_max_position_embeddings", max_pos)
                    : get_or<int64_t>(*r, "original_max_position_embeddings", max_pos);
    if (v < 1) {
      throw UsageError("config.json: " + where +
                       ".original_max_position_embeddings must be >= 1, got " + num(v));
    }
    return v;
  };
  if (type == "default") {
    out.emplace_back("model.rope_scaling", "none");
  } else if (type == "linear") {
    out.insert(out.end(), {{"model.rope_scaling", "linear"},
                           {"model.rope_factor", num(factor_of(*r, where, 0))}});
  } else if (type == "dynamic") {
    out.insert(out.end(), {{"model.rope_scaling", "dynamic"},
                           {"model.rope_factor", num(factor_of(*r, where, 0))},
                           {"model.rope_original_max", num(max_pos)}});
  } else if (type == "llama3") {
    out.insert(out.end(),
               {{"model.rope_scaling", "llama3"},
                {"model.rope_factor", num(factor_of(*r, where, 0))},
                {"model.rope_original_max", num(original())},
                {"model.rope_low_freq_factor", num(get_or<double>(*r, "low_freq_factor", 1.0))},
                {"model.rope_high_freq_factor", num(get_or<double>(*r, "high_freq_factor", 4.0))}});
  } else if (type == "yarn") {
    const int64_t orig = original();
    // No factor: the ratio of the contexts (DeepSeek-V3's configs).
    const double factor = factor_of(*r, where, static_cast<double>(max_pos) / orig);
    double attention = get_or<double>(*r, "attention_factor", 0.0);
    if (has(*r, "attention_factor") && !(attention > 0)) {
      throw UsageError("config.json: " + where + ".attention_factor must be > 0, got " +
                       num(attention));
    }
    const double mscale = get_or<double>(*r, "mscale", 0.0);
    const double mscale_all_dim = get_or<double>(*r, "mscale_all_dim", 0.0);
    if (!has(*r, "attention_factor") && mscale != 0 && mscale_all_dim != 0) {
      attention = yarn_mscale(factor, mscale) / yarn_mscale(factor, mscale_all_dim);
    }
    // HF: `rope_parameters.get("beta_fast") or 32`: 0 and null both mean the default.
    const double beta_fast = get_or<double>(*r, "beta_fast", 0.0);
    const double beta_slow = get_or<double>(*r, "beta_slow", 0.0);
    out.insert(out.end(),
               {{"model.rope_scaling", "yarn"},
                {"model.rope_factor", num(factor)},
                {"model.rope_original_max", num(orig)},
                {"model.rope_attention_factor", num(attention)},
                {"model.rope_beta_fast", num(beta_fast != 0 ? beta_fast : 32.0)},
                {"model.rope_beta_slow", num(beta_slow != 0 ? beta_slow : 1.0)},
                {"model.rope_truncate", get_or<bool>(*r, "truncate", true) ? "true" : "false"}});
  } else {
    throw UsageError("config.json: " + where + ".rope_type '" + type + "' (" + r->dump() +
                     ") is not supported: lmtrain implements RoPE with no scaling, linear, "
                     "dynamic, yarn and llama3");
  }
  return out;
}

namespace {

// The sliding layers of a Qwen2/Qwen3 config.json: layer_types (5.x), else the layers from
// max_window_layers on (4.x, and 5.x's default layer_types). n_layer is checked small enough
// to list by the caller.
std::vector<bool> qwen_sliding_layers(const json& j, int64_t n_layer) {
  std::vector<bool> sliding(static_cast<size_t>(n_layer), false);
  if (has(j, "layer_types")) {
    const json& lt = j["layer_types"];
    if (!lt.is_array() || static_cast<int64_t>(lt.size()) != n_layer) {
      throw UsageError("config.json: layer_types must list num_hidden_layers entries");
    }
    for (size_t i = 0; i < lt.size(); ++i) {
      const std::string t = lt[i].is_string() ? lt[i].get<std::string>() : lt[i].dump();
      if (t != "sliding_attention" && t != "full_attention") {
        throw UsageError("config.json: layer_types[" + std::to_string(i) + "] '" + t +
                         "' is not supported (full_attention, sliding_attention)");
      }
      sliding[i] = t == "sliding_attention";
    }
    return sliding;
  }
  const int64_t first = get_or<int64_t>(j, "max_window_layers", n_layer);
  for (int64_t l = std::max<int64_t>(first, 0); l < n_layer; ++l) sliding[l] = true;
  return sliding;
}

// sliding_window as a size: a positive integer.
int64_t window_size(const json& j) {
  const auto w = get_or<int64_t>(j, "sliding_window", 0);
  if (w < 1) throw UsageError("config.json: sliding_window must be >= 1 or null, got " + num(w));
  return w;
}

}  // namespace

Overrides window_overrides(const json& j, Arch type, int64_t n_layer, int64_t context) {
  const Overrides none = {{"model.windows", ""}};
  if (type == Arch::kMistral || type == Arch::kMixtral) {
    // Every layer slides whenever sliding_window is set (no use_sliding_window switch).
    if (!has(j, "sliding_window")) return none;
    const int64_t w = window_size(j);
    return w >= context ? none : Overrides{{"model.windows", num(w)}};
  }
  if (type != Arch::kQwen2 && type != Arch::kQwen3) return none;
  // 5.x clears sliding_window unless use_sliding_window; layer_types then slides nothing.
  if (!get_or<bool>(j, "use_sliding_window", false) || !has(j, "sliding_window")) return none;
  const int64_t w = window_size(j);
  if (w >= context) return none;
  if (n_layer > 4096) {
    throw UsageError("config.json: num_hidden_layers " + num(n_layer) +
                     " with sliding windows is more layers than lmtrain holds");
  }
  const auto sliding = qwen_sliding_layers(j, n_layer);
  std::string list;
  bool any = false;
  for (bool s : sliding) {
    list += (list.empty() ? "" : ",") + (s ? num(w) : std::string("0"));
    any = any || s;
  }
  return any ? Overrides{{"model.windows", list}} : none;
}

void write_rope(json& j, const GptConfig& c) {
  const auto& s = c.rope_scaling;
  json params = json::object();
  switch (s.type) {
    case RopeType::kNone:
      break;
    case RopeType::kLinear:
      params = {{"factor", s.factor}};
      break;
    case RopeType::kDynamic:
      params = {{"factor", s.factor}};
      // HF grows the base past max_position_embeddings; lmtrain's block may be longer.
      j["max_position_embeddings"] = s.original_max;
      break;
    case RopeType::kYarn:
      params = {{"factor", s.factor},
                {"original_max_position_embeddings", s.original_max},
                {"beta_fast", s.beta_fast},
                {"beta_slow", s.beta_slow},
                {"truncate", s.truncate}};
      if (s.attention_factor > 0) params["attention_factor"] = s.attention_factor;
      break;
    case RopeType::kLlama3:
      params = {{"factor", s.factor},
                {"original_max_position_embeddings", s.original_max},
                {"low_freq_factor", s.low_freq_factor},
                {"high_freq_factor", s.high_freq_factor}};
      break;
  }
  const std::string type = s.type == RopeType::kNone ? "default" : core::to_string(s.type);
  j["rope_theta"] = c.rope_theta;
  json nested = params;
  nested["rope_theta"] = c.rope_theta;
  nested["rope_type"] = type;
  j["rope_parameters"] = nested;
  if (s.type == RopeType::kNone) {
    j["rope_scaling"] = nullptr;
  } else {
    params["rope_type"] = type;
    j["rope_scaling"] = params;
  }
}

void write_windows(json& j, const GptConfig& c) {
  const std::string arch = core::to_string(c.arch);
  const std::string windows = describe_windows(c);
  if (c.arch == Arch::kMistral || c.arch == Arch::kMixtral) {
    j["sliding_window"] = nullptr;
    if (!c.windowed()) return;
    for (int64_t l = 0; l < c.n_layer; ++l) {
      if (c.window(l) != c.window(0)) {
        throw UsageError("model.windows = " + windows + ": Hugging Face's " + arch +
                         " has one sliding window for every layer");
      }
    }
    j["sliding_window"] = c.window(0);
    return;
  }
  if (c.arch == Arch::kQwen2 || c.arch == Arch::kQwen3 || c.arch == Arch::kQwen3Moe) {
    // Full layers first, then windowed ones of one size: Qwen's max_window_layers.
    int64_t first = c.n_layer, w = 0;
    for (int64_t l = 0; l < c.n_layer; ++l) {
      if (c.window(l) > 0 && first == c.n_layer) first = l, w = c.window(l);
      if (l >= first && c.window(l) != w) {
        throw UsageError("model.windows = " + windows + ": Hugging Face's " + arch +
                         " slides the layers from max_window_layers on, all with one window");
      }
    }
    if (c.windowed() && c.arch == Arch::kQwen3Moe) {
      throw UsageError("model.windows = " + windows +
                       ": export of qwen3_moe with sliding "
                       "windows is not supported");
    }
    std::vector<std::string> types;
    for (int64_t l = 0; l < c.n_layer; ++l) {
      types.push_back(l >= first ? "sliding_attention" : "full_attention");
    }
    j["use_sliding_window"] = c.windowed();
    j["sliding_window"] = c.windowed() ? json(w) : json(nullptr);
    j["max_window_layers"] = first;
    j["layer_types"] = types;
    return;
  }
  if (c.windowed()) {
    throw UsageError("model.windows = " + windows + ": Hugging Face's " + arch +
                     " has no sliding-window attention (mistral, qwen2 and qwen3 do)");
  }
}

}  // namespace lmtrain::model::hf
