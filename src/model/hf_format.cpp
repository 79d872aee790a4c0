#include "model/hf_format.h"

#include <ATen/ATen.h>

#include <set>

#include "core/error.h"
#include "core/log.h"

namespace lmtrain::model::hf {
namespace {

template <typename T>
T get_or(const nlohmann::json& j, const char* key, T fallback) {
  return j.contains(key) && !j[key].is_null() ? j[key].get<T>() : fallback;
}

std::string num(double v) { return log::format("%.17g", v); }
std::string num(int64_t v) { return std::to_string(v); }

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The per-block parameter pairs (lmtrain suffix, HF suffix) that map one to one; c_attn and
// c_fc (fused here, split in HF) are handled separately.
std::vector<std::pair<std::string, std::string>> llama_block_pairs(const GptConfig& c) {
  std::vector<std::pair<std::string, std::string>> p = {
      {"ln_1.weight", "input_layernorm.weight"},
      {"ln_2.weight", "post_attention_layernorm.weight"},
      {"attn.c_proj.weight", "self_attn.o_proj.weight"},
      {"mlp.c_proj.weight", "mlp.down_proj.weight"},
  };
  if (c.qk_norm) {
    p.emplace_back("attn.q_norm.weight", "self_attn.q_norm.weight");
    p.emplace_back("attn.k_norm.weight", "self_attn.k_norm.weight");
  }
  return p;
}

void check_llama_family(const GptConfig& c) {
  if (c.norm != "rmsnorm" || c.pos != "rope" || c.mlp != "swiglu" || c.bias ||
      c.logit_softcap > 0) {
    throw UsageError("model.arch=" + c.arch +
                     " needs norm=rmsnorm, pos=rope, mlp=swiglu, bias=false and no soft-capping "
                     "to match Hugging Face's " +
                     c.arch);
  }
  if ((c.arch == "qwen3") != c.qk_norm) {
    throw UsageError("model.qk_norm must be " + std::string(c.arch == "qwen3" ? "true" : "false") +
                     " for model.arch=" + c.arch);
  }
  if ((c.arch == "qwen2") != c.qkv_bias) {
    throw UsageError("model.qkv_bias must be " + std::string(c.arch == "qwen2" ? "true" : "false") +
                     " for model.arch=" + c.arch);
  }
}

void check_gpt2(const GptConfig& c) {
  if (c.norm != "layernorm" || c.pos != "learned" || c.mlp != "gelu" || !c.bias ||
      c.kv_heads() != c.n_head || c.head_dim() * c.n_head != c.n_embd || c.qk_norm ||
      c.logit_softcap > 0 || c.hidden_dim() != 4 * c.n_embd) {
    throw UsageError(
        "model.arch=gpt2 exports only GPT-2 itself (layernorm, learned positions, gelu, biases, "
        "full heads, 4x MLP)");
  }
}

}  // namespace

std::vector<std::pair<std::string, std::string>> config_overrides(const nlohmann::json& j) {
  const std::string type = get_or<std::string>(j, "model_type", "");
  std::vector<std::pair<std::string, std::string>> o;
  if (type == "gpt2") {
    const auto C = get_or<int64_t>(j, "n_embd", 768);
    o = {{"model.arch", "gpt2"},
         {"model.n_layer", num(get_or<int64_t>(j, "n_layer", 12))},
         {"model.n_head", num(get_or<int64_t>(j, "n_head", 12))},
         {"model.n_embd", num(C)},
         {"model.block_size", num(get_or<int64_t>(j, "n_positions", 1024))},
         {"model.vocab_size", num(get_or<int64_t>(j, "vocab_size", 50257))},
         {"model.norm_eps", num(get_or<double>(j, "layer_norm_epsilon", 1e-5))},
         {"model.mlp_hidden", num(get_or<int64_t>(j, "n_inner", 4 * C))},
         {"model.tie_embeddings", get_or<bool>(j, "tie_word_embeddings", true) ? "true" : "false"},
         {"model.bias", "true"}};
    const auto act = get_or<std::string>(j, "activation_function", "gelu_new");
    if (act != "gelu_new" && act != "gelu_pytorch_tanh") {
      throw UsageError("config.json: GPT-2 activation_function '" + act +
                       "' is not supported (gelu_new)");
    }
    return o;
  }
  if (type == "llama" || type == "qwen2" || type == "qwen3") {
    const auto C = get_or<int64_t>(j, "hidden_size", 4096);
    const auto H = get_or<int64_t>(j, "num_attention_heads", 32);
    if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
      throw UsageError("config.json: rope_scaling " + j["rope_scaling"].dump() +
                       " is not supported (plain RoPE only)");
    }
    const auto act = get_or<std::string>(j, "hidden_act", "silu");
    if (act != "silu") throw UsageError("config.json: hidden_act '" + act + "' is not supported");
    if (get_or<bool>(j, "mlp_bias", false)) {
      throw UsageError("config.json: mlp_bias=true is not supported");
    }
    const bool attention_bias = get_or<bool>(j, "attention_bias", type == "qwen2");
    if (type == "llama" && attention_bias) {
      throw UsageError("config.json: llama attention_bias=true is not supported");
    }
    o = {
        {"model.arch", type},
        {"model.n_layer", num(get_or<int64_t>(j, "num_hidden_layers", 32))},
        {"model.n_head", num(H)},
        {"model.n_kv_head", num(get_or<int64_t>(j, "num_key_value_heads", H))},
        {"model.n_embd", num(C)},
        {"model.head_dim", num(get_or<int64_t>(j, "head_dim", C / H))},
        {"model.mlp", "swiglu"},
        {"model.mlp_hidden", num(get_or<int64_t>(j, "intermediate_size", 4 * C))},
        {"model.norm", "rmsnorm"},
        {"model.norm_eps", num(get_or<double>(j, "rms_norm_eps", 1e-6))},
        {"model.pos", "rope"},
        {"model.rope_theta", num(get_or<double>(j, "rope_theta", 10000.0))},
        {"model.qk_norm", type == "qwen3" ? "true" : "false"},
        {"model.qkv_bias", type == "qwen2" ? "true" : "false"},
        {"model.bias", "false"},
        {"model.block_size", num(get_or<int64_t>(j, "max_position_embeddings", 2048))},
        {"model.vocab_size", num(get_or<int64_t>(j, "vocab_size", 32000))},
        {"model.tie_embeddings", get_or<bool>(j, "tie_word_embeddings", false) ? "true" : "false"}};
    return o;
  }
  throw UsageError("config.json: model_type '" + type +
                   "' is not supported (supported: gpt2, llama, qwen2, qwen3)");
}

nlohmann::json hf_config(const GptConfig& c) {
  if (c.arch == "gpt2") {
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
            {"torch_dtype", "float32"}};
  }
  if (c.arch == "llama" || c.arch == "qwen2" || c.arch == "qwen3") {
    check_llama_family(c);
    const std::string cls = c.arch == "llama"   ? "LlamaForCausalLM"
                            : c.arch == "qwen2" ? "Qwen2ForCausalLM"
                                                : "Qwen3ForCausalLM";
    nlohmann::json j = {{"model_type", c.arch},
                        {"architectures", {cls}},
                        {"hidden_size", c.n_embd},
                        {"intermediate_size", c.hidden_dim()},
                        {"num_hidden_layers", c.n_layer},
                        {"num_attention_heads", c.n_head},
                        {"num_key_value_heads", c.kv_heads()},
                        {"head_dim", c.head_dim()},
                        {"hidden_act", "silu"},
                        {"rms_norm_eps", c.norm_eps},
                        {"rope_theta", c.rope_theta},
                        {"rope_scaling", nullptr},
                        {"max_position_embeddings", c.block_size},
                        {"vocab_size", c.vocab_size},
                        {"tie_word_embeddings", c.tie_embeddings},
                        {"attention_dropout", 0.0},
                        {"torch_dtype", "float32"}};
    if (c.arch == "llama") {
      j["attention_bias"] = false;
      j["mlp_bias"] = false;
    }
    if (c.arch == "qwen3") j["attention_bias"] = false;
    return j;
  }
  throw UsageError("model.arch=" + c.arch +
                   " has no Hugging Face transformers equivalent (export supports gpt2, llama, "
                   "qwen2, qwen3)");
}

namespace {

// Looks up an HF tensor (optionally under "transformer."), checks its shape, marks it used.
class HfReader {
 public:
  explicit HfReader(const Tensors& hf) : hf_(hf) {}
  at::Tensor take(const std::string& name, const std::vector<int64_t>& shape) {
    auto it = hf_.find(name);
    if (it == hf_.end()) it = hf_.find("transformer." + name);
    if (it == hf_.end() && name.rfind("transformer.", 0) == 0) it = hf_.find(name.substr(12));
    if (it == hf_.end()) throw Error("Hugging Face checkpoint has no tensor '" + name + "'");
    if (it->second.sizes().vec() != shape) {
      throw Error("Hugging Face tensor '" + it->first + "' has shape " +
                  c10::str(it->second.sizes()) + ", the config implies " +
                  c10::str(c10::IntArrayRef(shape)));
    }
    used_.insert(it->first);
    return it->second.to(at::kFloat).contiguous();
  }
  void check_all_used() const {
    for (const auto& [name, t] : hf_) {
      if (used_.count(name)) continue;
      // Buffers, not parameters: GPT-2's causal masks, rotary frequency caches; and a tied
      // head stored anyway.
      if (ends_with(name, ".attn.bias") || ends_with(name, ".attn.masked_bias") ||
          ends_with(name, "rotary_emb.inv_freq") || name == "lm_head.weight") {
        continue;
      }
      throw Error("Hugging Face tensor '" + name + "' has no place in this model");
    }
  }

 private:
  const Tensors& hf_;
  std::set<std::string> used_;
};

}  // namespace

Tensors import_tensors(const GptConfig& c, const Tensors& hf) {
  HfReader in(hf);
  Tensors out;
  const int64_t C = c.n_embd, V = c.vocab_size, D = c.head_dim(), H = c.n_head, K = c.kv_heads();
  const int64_t I = c.hidden_dim();
  if (c.arch == "gpt2") {
    check_gpt2(c);
    out["transformer.wte.weight"] = in.take("transformer.wte.weight", {V, C});
    out["transformer.wpe.weight"] = in.take("transformer.wpe.weight", {c.block_size, C});
    for (int64_t l = 0; l < c.n_layer; ++l) {
      const std::string p = "transformer.h." + std::to_string(l) + ".";
      for (const char* ln : {"ln_1", "ln_2"}) {
        out[p + ln + ".weight"] = in.take(p + ln + ".weight", {C});
        out[p + ln + ".bias"] = in.take(p + ln + ".bias", {C});
      }
      // Conv1D stores (in, out); our Linear (out, in).
      const std::vector<std::tuple<std::string, int64_t, int64_t>> convs = {
          {"attn.c_attn", C, 3 * C},
          {"attn.c_proj", C, C},
          {"mlp.c_fc", C, I},
          {"mlp.c_proj", I, C}};
      for (const auto& [m, fan_in, fan_out] : convs) {
        out[p + m + ".weight"] = in.take(p + m + ".weight", {fan_in, fan_out}).t().contiguous();
        out[p + m + ".bias"] = in.take(p + m + ".bias", {fan_out});
      }
    }
    out["transformer.ln_f.weight"] = in.take("transformer.ln_f.weight", {C});
    out["transformer.ln_f.bias"] = in.take("transformer.ln_f.bias", {C});
    if (!c.tie_embeddings) out["lm_head.weight"] = in.take("lm_head.weight", {V, C});
    in.check_all_used();
    return out;
  }
  check_llama_family(c);
  out["transformer.wte.weight"] = in.take("model.embed_tokens.weight", {V, C});
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "transformer.h." + std::to_string(l) + ".";
    const std::string q = "model.layers." + std::to_string(l) + ".";
    for (const auto& [ours, theirs] : llama_block_pairs(c)) {
      std::vector<int64_t> shape = {C};  // ln_1, ln_2
      if (ours == "attn.c_proj.weight") shape = {C, H * D};
      if (ours == "mlp.c_proj.weight") shape = {C, I};
      if (ours == "attn.q_norm.weight" || ours == "attn.k_norm.weight") shape = {D};
      out[p + ours] = in.take(q + theirs, shape);
    }
    out[p + "attn.c_attn.weight"] = at::cat({in.take(q + "self_attn.q_proj.weight", {H * D, C}),
                                             in.take(q + "self_attn.k_proj.weight", {K * D, C}),
                                             in.take(q + "self_attn.v_proj.weight", {K * D, C})});
    if (c.qkv_bias) {
      out[p + "attn.c_attn.bias"] = at::cat({in.take(q + "self_attn.q_proj.bias", {H * D}),
                                             in.take(q + "self_attn.k_proj.bias", {K * D}),
                                             in.take(q + "self_attn.v_proj.bias", {K * D})});
    }
    out[p + "mlp.c_fc.weight"] = at::cat(
        {in.take(q + "mlp.gate_proj.weight", {I, C}), in.take(q + "mlp.up_proj.weight", {I, C})});
  }
  out["transformer.ln_f.weight"] = in.take("model.norm.weight", {C});
  if (!c.tie_embeddings) out["lm_head.weight"] = in.take("lm_head.weight", {V, C});
  in.check_all_used();
  return out;
}

Tensors export_tensors(const GptConfig& c, const Tensors& ours) {
  auto get = [&](const std::string& name) {
    auto it = ours.find(name);
    if (it == ours.end()) throw Error("model has no parameter '" + name + "'");
    return it->second.detach().to(at::kFloat).contiguous();
  };
  Tensors out;
  const int64_t D = c.head_dim(), H = c.n_head, K = c.kv_heads(), I = c.hidden_dim();
  if (c.arch == "gpt2") {
    check_gpt2(c);
    for (const auto& [name, t] : ours) {
      const bool conv = ends_with(name, ".weight") && (name.find(".attn.c_") != std::string::npos ||
                                                       name.find(".mlp.c_") != std::string::npos);
      out[name] = conv ? get(name).t().contiguous() : get(name);
    }
    return out;
  }
  hf_config(c);  // validates the family
  out["model.embed_tokens.weight"] = get("transformer.wte.weight");
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "transformer.h." + std::to_string(l) + ".";
    const std::string q = "model.layers." + std::to_string(l) + ".";
    for (const auto& [o, theirs] : llama_block_pairs(c)) out[q + theirs] = get(p + o);
    const auto qkv = get(p + "attn.c_attn.weight");
    out[q + "self_attn.q_proj.weight"] = qkv.narrow(0, 0, H * D).contiguous();
    out[q + "self_attn.k_proj.weight"] = qkv.narrow(0, H * D, K * D).contiguous();
    out[q + "self_attn.v_proj.weight"] = qkv.narrow(0, (H + K) * D, K * D).contiguous();
    if (c.qkv_bias) {
      const auto b = get(p + "attn.c_attn.bias");
      out[q + "self_attn.q_proj.bias"] = b.narrow(0, 0, H * D).contiguous();
      out[q + "self_attn.k_proj.bias"] = b.narrow(0, H * D, K * D).contiguous();
      out[q + "self_attn.v_proj.bias"] = b.narrow(0, (H + K) * D, K * D).contiguous();
    }
    const auto fc = get(p + "mlp.c_fc.weight");
    out[q + "mlp.gate_proj.weight"] = fc.narrow(0, 0, I).contiguous();
    out[q + "mlp.up_proj.weight"] = fc.narrow(0, I, I).contiguous();
  }
  out["model.norm.weight"] = get("transformer.ln_f.weight");
  if (!c.tie_embeddings) out["lm_head.weight"] = get("lm_head.weight");
  return out;
}

}  // namespace lmtrain::model::hf
