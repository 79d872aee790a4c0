// The tiny decoders the KV cache tests share (2 layers, width 32, 4 heads, vocabulary 64,
// random weights) and feeding a sequence through a cache one token at a time.
#pragma once
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "infer/kv_cache_policy.h"
#include "model/gpt.h"
#include "model_fixtures.h"

namespace lmtrain::infer {

// family: "gpt2" (learned positions, LayerNorm, GELU), "rope" (Llama-style RMSNorm, RoPE,
// SwiGLU, 2 kv heads for 4 query heads), "qwen3" (rope + QK-norm), "moe" (qwen3 with dropless
// MoE blocks: 4 experts, top 2, so a batch's pad rows take no expert capacity).
inline model::GptConfig tiny_decoder(const std::string& family, int64_t block_size = 32) {
  model::GptConfig c = model::tiny_gpt_config(32, 64, block_size);
  c.n_head = 4;
  if (family == "gpt2") return c;
  c = model::with_llama_family(c, model::Arch::kLlama);
  c.n_kv_head = 2;
  if (family == "rope") return c;
  c.qk_norm = true;
  if (family == "moe") {
    c.moe.num_experts = 4;
    c.moe.top_k = 2;
    c.moe.expert_hidden = 24;
  }
  return c;
}

// The "rope" tiny decoder with per-layer windows and Llama 3.1's frequency scaling (from
// position 8), as Mistral lays it out.
inline model::GptConfig windowed_decoder(std::vector<int64_t> windows, int64_t block_size = 48) {
  auto c = tiny_decoder("rope", block_size);
  c.arch = model::Arch::kMistral;
  c.windows = std::move(windows);
  c.rope_theta = 500;
  c.rope_scaling.type = model::RopeType::kLlama3;
  c.rope_scaling.factor = 4;
  c.rope_scaling.original_max = 8;
  return c;
}

// A decoder of config `c` with weights drawn after torch::manual_seed(seed), in eval mode.
// The two position kinds the cache tests cover: RoPE (Llama-style) or learned (GPT-2).
inline model::GptConfig decoder_with(bool rope) { return tiny_decoder(rope ? "rope" : "gpt2"); }

inline model::Gpt eval_decoder(const model::GptConfig& c, uint64_t seed) {
  torch::manual_seed(seed);
  model::Gpt m(c);
  m->eval();
  return m;
}

// Logits (B, T, V) of `ids` fed one token at a time through `cache`.
inline at::Tensor token_by_token(model::GptImpl& m, const at::Tensor& ids, model::KvCache& cache) {
  std::vector<at::Tensor> out;
  for (int64_t t = 0; t < ids.size(1); ++t) {
    out.push_back(m.forward_cached(ids.narrow(1, t, 1), cache));
  }
  return at::cat(out, 1);
}

// A policy text that parse_kv_policy must refuse with a UsageError naming it.
inline void expect_rejected(const std::string& bad) {
  try {
    parse_kv_policy(bad);
    ADD_FAILURE() << bad << " was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
  }
}

}  // namespace lmtrain::infer
