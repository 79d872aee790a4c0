// config.json -> lmtrain model.* overrides (config_overrides): model_type and architectures,
// GPT-2's keys, the Llama family's (Llama, Mistral, Qwen2/3) and the MoE families' (Qwen3-MoE,
// Mixtral), each checked for what lmtrain cannot compute. Split from the writing side
// (hf_config_write.cpp); RoPE scaling and sliding windows are read in hf_rope.cpp and
// hf_window.cpp.
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
#include <set>

#include "core/config_choice.h"
#include "core/error.h"
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

}  // namespace lmtrain::model::hf
