#include "interop/hf_format.h"

#include <ATen/ATen.h>

#include <array>
#include <set>

#include "core/config_choice.h"
#include "core/error.h"

namespace lmtrain::model::hf {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The per-block parameter pairs (lmtrain suffix, HF suffix) that map one to one; c_attn and
// c_fc (fused here, split in HF) are handled separately.
std::vector<std::pair<std::string, std::string>> llama_block_pairs(const GptConfig& c,
                                                                   bool moe_layer) {
  std::vector<std::pair<std::string, std::string>> p = {
      {"ln_1.weight", "input_layernorm.weight"},
      {"ln_2.weight", "post_attention_layernorm.weight"},
      {"attn.c_proj.weight", "self_attn.o_proj.weight"},
  };
  if (!moe_layer) p.emplace_back("mlp.c_proj.weight", "mlp.down_proj.weight");
  if (c.qk_norm) {
    p.emplace_back("attn.q_norm.weight", "self_attn.q_norm.weight");
    p.emplace_back("attn.k_norm.weight", "self_attn.k_norm.weight");
  }
  return p;
}

}  // namespace

namespace {

// Looks up an HF tensor (optionally under "transformer."), checks its shape, marks it used.
class HfReader {
 public:
  explicit HfReader(const Tensors& hf) : hf_(hf) {}
  at::Tensor take(const std::string& name, const std::vector<int64_t>& shape) {
    auto it = hf_.find(name);
    if (it == hf_.end()) it = hf_.find("transformer." + name);
    if (it == hf_.end() && name.rfind("transformer.", 0) == 0) it = hf_.find(name.substr(12));
    if (it == hf_.end()) throw UsageError("Hugging Face checkpoint has no tensor '" + name + "'");
    if (it->second.sizes().vec() != shape) {
      throw UsageError("Hugging Face tensor '" + it->first + "' has shape " +
                       c10::str(it->second.sizes()) + ", the config implies " +
                       c10::str(c10::IntArrayRef(shape)));
    }
    used_.insert(it->first);
    return it->second.to(at::kFloat).contiguous();
  }
  bool has(const std::string& name) const { return hf_.count(name) > 0; }
  void check_all_used() const {
    for (const auto& [name, t] : hf_) {
      if (used_.count(name)) continue;
      // Buffers, not parameters: GPT-2's causal masks, rotary frequency caches; and a tied
      // head stored anyway.
      if (ends_with(name, ".attn.bias") || ends_with(name, ".attn.masked_bias") ||
          ends_with(name, "rotary_emb.inv_freq") || name == "lm_head.weight") {
        continue;
      }
      throw UsageError("Hugging Face tensor '" + name + "' has no place in this model");
    }
  }

 private:
  const Tensors& hf_;
  std::set<std::string> used_;
};

// The Hub's per-expert names of expert e's gate, up and down projections (under `block`).
std::array<std::string, 3> expert_names(const GptConfig& c, const std::string& block, int64_t e) {
  const std::string base = block + "experts." + std::to_string(e) + ".";
  if (c.arch == Arch::kMixtral) return {base + "w1.weight", base + "w3.weight", base + "w2.weight"};
  return {base + "gate_proj.weight", base + "up_proj.weight", base + "down_proj.weight"};
}

// Where the MoE block lives in HF names: Mixtral's Hub files say block_sparse_moe, everything
// transformers 5.x holds in memory says mlp.
std::string hub_moe_block(const GptConfig& c, const std::string& layer) {
  return layer + (c.arch == Arch::kMixtral ? "block_sparse_moe." : "mlp.");
}

// One MoE layer: router (E, C) and experts stacked as (E, 2I, C) [gate; up] and (E, C, I), from
// either the stacked layout (transformers 5.x in memory: mlp.gate, mlp.experts.gate_up_proj,
// mlp.experts.down_proj) or the Hub's one tensor per expert.
void import_moe_layer(const GptConfig& c, HfReader& in, const std::string& q, const std::string& p,
                      Tensors& out) {
  const int64_t E = c.moe.num_experts, C = c.n_embd, I = c.moe.expert_hidden;
  const std::string hub = hub_moe_block(c, q);
  out[p + "mlp.router.weight"] =
      in.take(in.has(q + "mlp.gate.weight") ? q + "mlp.gate.weight" : hub + "gate.weight", {E, C});
  if (in.has(q + "mlp.experts.gate_up_proj")) {
    out[p + "mlp.experts.c_fc.weight"] = in.take(q + "mlp.experts.gate_up_proj", {E, 2 * I, C});
    out[p + "mlp.experts.c_proj.weight"] = in.take(q + "mlp.experts.down_proj", {E, C, I});
    return;
  }
  std::vector<at::Tensor> fc, proj;
  for (int64_t e = 0; e < E; ++e) {
    const auto names = expert_names(c, hub, e);
    fc.push_back(at::cat({in.take(names[0], {I, C}), in.take(names[1], {I, C})}));
    proj.push_back(in.take(names[2], {C, I}));
  }
  out[p + "mlp.experts.c_fc.weight"] = at::stack(fc);
  out[p + "mlp.experts.c_proj.weight"] = at::stack(proj);
}

}  // namespace

Tensors import_tensors(const GptConfig& c, const Tensors& hf) {
  HfReader in(hf);
  Tensors out;
  const int64_t C = c.n_embd, V = c.vocab_size, D = c.head_dim(), H = c.n_head, K = c.kv_heads();
  const int64_t I = c.hidden_dim();
  if (c.arch == Arch::kGpt2) {
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
    const bool moe_layer = c.moe.is_moe_layer(l);
    for (const auto& [ours, theirs] : llama_block_pairs(c, moe_layer)) {
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
    if (moe_layer) {
      import_moe_layer(c, in, q, p, out);
      continue;
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
  if (c.arch == Arch::kGpt2) {
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
    const bool moe_layer = c.moe.is_moe_layer(l);
    for (const auto& [o, theirs] : llama_block_pairs(c, moe_layer)) out[q + theirs] = get(p + o);
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
    if (moe_layer) {
      // The Hub layout, which transformers 4.x and 5.x both read.
      if (auto it = ours.find(p + "mlp.expert_bias");
          it != ours.end() && it->second.abs().max().item<double>() > 0) {
        throw UsageError("model.moe.bias_update_rate trained a selection bias (layer " +
                         std::to_string(l) + "): Hugging Face's " + core::to_string(c.arch) +
                         " routes without one, so its logits would differ");
      }
      const std::string hub = hub_moe_block(c, q);
      out[hub + "gate.weight"] = get(p + "mlp.router.weight");
      const auto fc = get(p + "mlp.experts.c_fc.weight"),
                 proj = get(p + "mlp.experts.c_proj.weight");
      const int64_t EI = c.moe.expert_hidden;
      for (int64_t e = 0; e < c.moe.num_experts; ++e) {
        const auto names = expert_names(c, hub, e);
        out[names[0]] = fc[e].narrow(0, 0, EI).contiguous();
        out[names[1]] = fc[e].narrow(0, EI, EI).contiguous();
        out[names[2]] = proj[e].contiguous();
      }
      continue;
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
