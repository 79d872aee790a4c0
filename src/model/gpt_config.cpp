#include "model/gpt_config.h"

#include "core/config_choice.h"
#include "core/error.h"
#include "core/log.h"

namespace lmtrain::model {

void GptConfig::fill_vocab_size(int64_t tokenizer_vocab) {
  if (vocab_size == 0) {
    if (tokenizer_vocab <= 0) {
      throw UsageError(
          "config key 'model.vocab_size' is 0 (take it from the tokenizer) but no "
          "tokenizer is available: set model.vocab_size or data.dir");
    }
    vocab_size = (tokenizer_vocab + 63) / 64 * 64;
  } else if (tokenizer_vocab > vocab_size) {
    throw UsageError(
        log::format("config key 'model.vocab_size' = %lld is smaller than the "
                    "tokenizer's vocabulary (%lld tokens)",
                    (long long)vocab_size, (long long)tokenizer_vocab));
  }
}

namespace {

// Parameters of one MLP of hidden width I over width C.
int64_t mlp_params(const GptConfig& c, int64_t I) {
  const int64_t C = c.n_embd, b = c.bias ? 1 : 0;
  const int64_t fc = mlp_fc_rows(c.mlp, I);
  return (C * fc + b * fc) + (I * C + b * C);  // c_fc, c_proj
}

// Parameters of one routed expert (no biases).
int64_t expert_params(const GptConfig& c) {
  const int64_t I = c.moe.expert_hidden, fc = mlp_fc_rows(c.mlp, I);
  return c.n_embd * fc + I * c.n_embd;
}

}  // namespace

int64_t GptConfig::num_params() const {
  const int64_t C = n_embd, b = bias ? 1 : 0, D = head_dim(), H = n_head, K = kv_heads();
  const int64_t norm_params = !norm_weight ? 0 : norm == Norm::kRmsNorm ? C : C + b * C;
  const int64_t qkv = (H + 2 * K) * D;
  const int64_t attn_block = 2 * norm_params                          // ln_1, ln_2
                             + (C * qkv + (b || qkv_bias ? qkv : 0))  // c_attn
                             + (H * D * C + b * C)                    // attn.c_proj
                             + (qk_norm && norm_weight ? 2 * D : 0);  // q_norm, k_norm
  // An MoE feed-forward: router, the routed experts, the shared experts' MLP.
  const int64_t moe_ffn =
      moe.num_experts * C + moe.num_experts * expert_params(*this) +
      (moe.shared_experts > 0 ? mlp_params(*this, moe.shared_experts * moe.expert_hidden) : 0);
  int64_t n = vocab_size * C + norm_params;
  for (int64_t l = 0; l < n_layer; ++l) {
    n += attn_block + (moe.is_moe_layer(l) ? moe_ffn : mlp_params(*this, hidden_dim()));
  }
  if (pos == PosEncoding::kLearned) n += block_size * C;
  if (!tie_embeddings) n += vocab_size * C;
  for (int64_t l = 0; l < n_layer; ++l) {
    if (has_value_embed(l)) n += vocab_size * K * D + 12 * K;  // table, ve_gate
  }
  if (x0_lambdas) n += 2 * n_layer;
  if (smear) n += 24 + 1;
  if (backout) n += 1;
  return n;
}

int64_t GptConfig::scaling_params() const {
  int64_t n = num_params() - vocab_size * n_embd;  // less the token embedding
  if (pos == PosEncoding::kLearned) n -= block_size * n_embd;
  if (norm_weight) {
    n -= norm == Norm::kRmsNorm ? n_embd : n_embd + (bias ? n_embd : 0);  // ln_f
  }
  for (int64_t l = 0; l < n_layer; ++l) {
    if (has_value_embed(l)) n -= vocab_size * kv_heads() * head_dim();  // ve_gate stays
  }
  if (x0_lambdas) n -= 2 * n_layer;
  if (smear) n -= 24 + 1;
  if (backout) n -= 1;
  if (tie_embeddings) n += vocab_size * n_embd;  // the head, counted once above
  return n;
}

int64_t GptConfig::active_params() const {
  return num_params() -
         moe.moe_layers(n_layer) * (moe.num_experts - moe.top_k) * expert_params(*this);
}

std::string describe_rope(const RopeParams& rope) {
  const auto& s = rope.scaling;
  std::string out = log::format("rope theta %g", rope.theta);
  switch (s.type) {
    case RopeType::kNone:
      return out;
    case RopeType::kLinear:
      return out + log::format(", linear x%g", s.factor);
    case RopeType::kDynamic:
      return out + log::format(", dynamic x%g past %lld", s.factor, (long long)s.original_max);
    case RopeType::kYarn:
      return out + log::format(", yarn x%g from %lld (beta %g/%g, attention factor %g%s)", s.factor,
                               (long long)s.original_max, s.beta_fast, s.beta_slow,
                               s.attention_factor, s.truncate ? "" : ", untruncated");
    case RopeType::kLlama3:
      return out + log::format(", llama3 x%g from %lld (%g, %g)", s.factor,
                               (long long)s.original_max, s.low_freq_factor, s.high_freq_factor);
  }
  return out;
}

std::string describe_windows(const GptConfig& c) {
  if (!c.windowed()) return "none";
  std::string out;
  for (int64_t w : c.windows) out += (out.empty() ? "" : ",") + std::to_string(w);
  return out;
}

std::string GptConfig::describe() const {
  std::string extra;
  if (arch != Arch::kGpt2 || norm != Norm::kLayerNorm || pos != PosEncoding::kLearned ||
      mlp != MlpKind::kGelu) {
    extra = log::format(
        " (%s, %s, %s, %lld kv heads, head_dim %lld%s%s)", core::to_string(norm).c_str(),
        pos == PosEncoding::kRope ? describe_rope(rope_params()).c_str()
                                  : core::to_string(pos).c_str(),
        core::to_string(mlp).c_str(), (long long)kv_heads(), (long long)head_dim(),
        qk_norm ? ", qk-norm" : "",
        logit_softcap > 0 ? log::format(", softcap %g", logit_softcap).c_str() : "");
  }
  if (windowed()) extra += "; sliding windows " + describe_windows(*this);
  if (value_embeds || smear || backout || x0_lambdas) {
    extra += log::format("; nanochat parts:%s%s%s%s", value_embeds ? " value-embeds" : "",
                         smear ? " smear" : "", backout ? " backout" : "",
                         x0_lambdas ? " x0-lambdas" : "");
  }
  if (moe.enabled()) {
    extra +=
        log::format("; %s in %lld of %lld layers, %.2fM active per token", moe.describe().c_str(),
                    (long long)moe.moe_layers(n_layer), (long long)n_layer, active_params() / 1e6);
  }
  return log::format(
      "%s: %lld layers, %lld heads, width %lld, vocab %lld, block %lld, "
      "%.2fM parameters%s",
      core::to_string(arch).c_str(), (long long)n_layer, (long long)n_head, (long long)n_embd,
      (long long)vocab_size, (long long)block_size, num_params() / 1e6, extra.c_str());
}

}  // namespace lmtrain::model
