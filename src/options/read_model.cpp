#include "options/read_model.h"

#include <cctype>

#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "core/text_list.h"
#include "model/temporal/temporal_encoder.h"

namespace lmtrain::options {
namespace {

std::vector<int64_t> parse_layer_list(const std::string& text, int64_t n_layer) {
  std::vector<int64_t> out;
  for (const auto& item : core::split_list(text)) {
    if (item.empty()) continue;
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (*end != '\0' || v < 0 || v >= n_layer) {
      throw UsageError(log::format(
          "config key 'model.moe.dense_layers' = '%s': '%s' is not a layer index in [0, %lld)",
          text.c_str(), item.c_str(), (long long)n_layer));
    }
    out.push_back(v);
  }
  return out;
}

// model.windows: non-negative window sizes, at most one per layer (tiled over the layers).
std::vector<int64_t> parse_windows(const std::string& text, int64_t n_layer) {
  std::vector<int64_t> out;
  for (const auto& item : core::split_list(text)) {
    if (item.empty()) continue;
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (*end != '\0' || v < 0) {
      throw UsageError(log::format(
          "config key 'model.windows' = '%s': '%s' is not a window size (an integer >= 0; 0 = "
          "full attention)",
          text.c_str(), item.c_str()));
    }
    out.push_back(v);
  }
  if (static_cast<int64_t>(out.size()) > n_layer) {
    throw UsageError(log::format(
        "config key 'model.windows' = '%s' lists %lld windows for %lld layers (at most one per "
        "layer; a shorter list is tiled)",
        text.c_str(), (long long)out.size(), (long long)n_layer));
  }
  bool any = false;
  for (int64_t w : out) any = any || w > 0;
  if (!any) out.clear();  // all zero: no window
  return out;
}

}  // namespace

std::vector<int64_t> windows_from_pattern(const std::string& pattern, int64_t n_layer,
                                          int64_t context) {
  if (pattern.empty()) return {};
  const int64_t short_window = (context / 4 + 127) / 128 * 128;  // nanochat: -(-T // 4 // 128)
  std::vector<int64_t> out;
  for (int64_t layer = 0; layer < n_layer; ++layer) {
    const char c = static_cast<char>(std::toupper(pattern[layer % pattern.size()]));
    if (c != 'S' && c != 'L') {
      throw UsageError("config key 'model.window_pattern' = '" + pattern +
                       "': use only S (short window) and L (long, the whole context)");
    }
    // Long, or a short window that covers the context anyway: full causal attention.
    const bool full = c == 'L' || layer == n_layer - 1 || short_window + 1 >= context;
    out.push_back(full ? 0 : short_window + 1);
  }
  bool any = false;
  for (int64_t w : out) any = any || w > 0;
  if (!any) out.clear();
  return out;
}

namespace {

// model.rope_scaling and its parameters; original_max 0 becomes the block size.
model::RopeScaling read_rope_scaling(const core::Config& cfg, int64_t block_size) {
  model::RopeScaling s;
  s.type = core::get_choice<model::RopeType>(cfg);
  s.factor = cfg.get_float("model.rope_factor");
  s.original_max = cfg.get_int("model.rope_original_max");
  s.low_freq_factor = cfg.get_float("model.rope_low_freq_factor");
  s.high_freq_factor = cfg.get_float("model.rope_high_freq_factor");
  s.beta_fast = cfg.get_float("model.rope_beta_fast");
  s.beta_slow = cfg.get_float("model.rope_beta_slow");
  s.attention_factor = cfg.get_float("model.rope_attention_factor");
  s.truncate = cfg.get_bool("model.rope_truncate");
  if (s.type == model::RopeType::kNone) return s;
  if (s.original_max == 0) s.original_max = block_size;
  if (s.type == model::RopeType::kLlama3 &&
      !(s.low_freq_factor > 0 && s.high_freq_factor > s.low_freq_factor)) {
    throw UsageError(
        log::format("model.rope_scaling = llama3 needs 0 < 'model.rope_low_freq_factor' (%g) < "
                    "'model.rope_high_freq_factor' (%g)",
                    s.low_freq_factor, s.high_freq_factor));
  }
  if (s.type == model::RopeType::kYarn && !(s.beta_fast > 0 && s.beta_slow > 0)) {
    throw UsageError(log::format(
        "model.rope_scaling = yarn needs 'model.rope_beta_fast' (%g) and 'model.rope_beta_slow' "
        "(%g) > 0",
        s.beta_fast, s.beta_slow));
  }
  return s;
}

}  // namespace

model::GptConfig read_gpt_config(const core::Config& cfg, int64_t tokenizer_vocab) {
  model::GptConfig c;
  c.n_layer = cfg.get_int("model.n_layer");
  c.n_head = cfg.get_int("model.n_head");
  c.n_embd = cfg.get_int("model.n_embd");
  c.vocab_size = cfg.get_int("model.vocab_size");
  c.block_size = cfg.get_int("model.block_size");
  c.dropout = cfg.get_float("model.dropout");
  c.bias = cfg.get_bool("model.bias");
  c.tie_embeddings = cfg.get_bool("model.tie_embeddings");
  c.init_std = cfg.get_float("model.init_std");
  c.arch = core::get_choice<model::Arch>(cfg);
  c.norm = core::get_choice<model::Norm>(cfg);
  c.norm_eps = cfg.get_float("model.norm_eps");
  c.pos = core::get_choice<model::PosEncoding>(cfg);
  c.rope_theta = cfg.get_float("model.rope_theta");
  c.mlp = core::get_choice<model::MlpKind>(cfg);
  c.mlp_hidden = cfg.get_int("model.mlp_hidden");
  c.n_kv_head = cfg.get_int("model.n_kv_head");
  c.head_dim_ = cfg.get_int("model.head_dim");
  c.qk_norm = cfg.get_bool("model.qk_norm");
  c.qkv_bias = cfg.get_bool("model.qkv_bias");
  c.logit_softcap = cfg.get_float("model.logit_softcap");
  if (const int64_t depth = cfg.get_int("model.depth"); depth > 0) {
    // nanochat's depth scaling (a run's config already holds these keys, cli/run_config.cpp;
    // older checkpoints' configs may not).
    for (const auto& [key, value] : core::depth_scaled_keys(depth)) {
      if (key == "model.n_layer") c.n_layer = value;
      if (key == "model.n_embd") c.n_embd = value;
      if (key == "model.n_head") c.n_head = value;
      if (key == "model.head_dim") c.head_dim_ = value;
    }
  }
  c.moe = read_moe_config(cfg, c.n_layer, c.hidden_dim());
  c.rope_scaling = read_rope_scaling(cfg, c.block_size);
  if (c.rope_scaling.type != model::RopeType::kNone && c.pos != model::PosEncoding::kRope) {
    throw UsageError("config key 'model.rope_scaling' = " + core::to_string(c.rope_scaling.type) +
                     " needs model.pos = rope");
  }
  c.windows = parse_windows(cfg.get_string("model.windows"), c.n_layer);
  if (const auto pattern = cfg.get_string("model.window_pattern"); !pattern.empty()) {
    if (!c.windows.empty()) {
      throw UsageError("config keys 'model.window_pattern' = '" + pattern +
                       "' and 'model.windows' = '" + cfg.get_string("model.windows") +
                       "' both set the windows: keep one of them");
    }
    c.windows = windows_from_pattern(pattern, c.n_layer, c.block_size);
  }
  c.norm_weight = cfg.get_bool("model.norm_weight");
  c.embed_norm = cfg.get_bool("model.embed_norm");
  c.qk_scale = cfg.get_float("model.qk_scale");
  c.x0_lambdas = cfg.get_bool("model.x0_lambdas");
  c.value_embeds = cfg.get_bool("model.value_embeds");
  c.smear = cfg.get_bool("model.smear");
  c.backout = cfg.get_bool("model.backout");
  if ((c.x0_lambdas || c.value_embeds || c.smear || c.backout || c.embed_norm ||
       c.qk_scale != 1.0 || !c.norm_weight) &&
      c.arch != model::Arch::kNanochat) {
    throw UsageError(
        "config keys model.norm_weight=false, embed_norm, qk_scale, x0_lambdas, value_embeds, "
        "smear and backout are nanochat's: they need model.arch = nanochat");
  }
  if (c.n_kv_head > 0 && c.n_head % c.n_kv_head != 0) {
    throw UsageError(
        log::format("config key 'model.n_kv_head' = %lld must divide 'model.n_head' "
                    "= %lld (each kv head serves a group of query heads)",
                    (long long)c.n_kv_head, (long long)c.n_head));
  }
  if (c.pos == model::PosEncoding::kRope && c.head_dim() % 2 != 0) {
    throw UsageError(
        log::format("model.pos = rope needs an even head_dim (got %lld)", (long long)c.head_dim()));
  }
  if (c.head_dim_ == 0 && c.n_embd % c.n_head != 0) {
    throw UsageError(
        log::format("config key 'model.n_embd' = %lld must be divisible by "
                    "'model.n_head' = %lld",
                    (long long)c.n_embd, (long long)c.n_head));
  }
  if (tokenizer_vocab != kTokenizerLater) c.fill_vocab_size(tokenizer_vocab);
  const int64_t seq_len = cfg.get_int("data.seq_len");
  if (seq_len > c.block_size) {
    throw UsageError(
        log::format("config key 'data.seq_len' = %lld exceeds 'model.block_size' = "
                    "%lld (the model has no positions beyond it)",
                    (long long)seq_len, (long long)c.block_size));
  }
  return c;
}

model::MoeConfig read_moe_config(const core::Config& cfg, int64_t n_layer, int64_t dense_hidden) {
  model::MoeConfig m;
  m.num_experts = cfg.get_int("model.moe.num_experts");
  m.top_k = cfg.get_int("model.moe.top_k");
  m.expert_hidden = cfg.get_int("model.moe.expert_hidden");
  if (m.expert_hidden == 0) m.expert_hidden = dense_hidden;
  m.shared_experts = cfg.get_int("model.moe.shared_experts");
  m.every = cfg.get_int("model.moe.every");
  m.dense_layers = parse_layer_list(cfg.get_string("model.moe.dense_layers"), n_layer);
  m.gate = core::get_choice<model::MoeGate>(cfg);
  m.renormalize = cfg.get_bool("model.moe.renormalize");
  m.capacity_factor = cfg.get_float("model.moe.capacity_factor");
  m.aux_loss_coef = cfg.get_float("model.moe.aux_loss_coef");
  m.z_loss_coef = cfg.get_float("model.moe.z_loss_coef");
  m.bias_update_rate = cfg.get_float("model.moe.bias_update_rate");
  if (m.enabled() && m.top_k > m.num_experts) {
    throw UsageError(log::format(
        "config key 'model.moe.top_k' = %lld exceeds 'model.moe.num_experts' = %lld (each token "
        "picks top_k distinct experts)",
        (long long)m.top_k, (long long)m.num_experts));
  }
  if (m.enabled() && m.moe_layers(n_layer) == 0) {
    throw UsageError(log::format(
        "model.moe.num_experts = %lld but no layer is an MoE layer: 'model.moe.every' = %lld and "
        "'model.moe.dense_layers' = '%s' leave all %lld layers dense",
        (long long)m.num_experts, (long long)m.every,
        cfg.get_string("model.moe.dense_layers").c_str(), (long long)n_layer));
  }
  return m;
}

model::LoraOptions read_lora_options(const core::Config& cfg) {
  model::LoraOptions o;
  o.rank = cfg.get_int("lora.rank");
  o.alpha = cfg.get_float("lora.alpha");
  o.dropout = cfg.get_float("lora.dropout");
  o.decay = cfg.get_bool("lora.decay");
  o.targets = model::parse_lora_targets(cfg.get_string("lora.targets"));
  model::parse_lora_unfreeze(cfg.get_string("lora.unfreeze"), o);
  if (!o.enabled()) return o;
  if (o.unfreeze_head && cfg.get_bool("model.tie_embeddings")) {
    throw UsageError(
        "config key 'lora.unfreeze' has 'head', but model.tie_embeddings is true: the head is "
        "the token embedding (unfreeze 'embeddings' instead)");
  }
  if (o.targets.empty()) {
    throw UsageError("config key 'lora.targets' is empty: name the layers to adapt (e.g. q,v)");
  }
  if (o.targets_contain(model::LoraTarget::kHead) && cfg.get_bool("model.tie_embeddings")) {
    throw UsageError(
        "config key 'lora.targets' has 'head', but model.tie_embeddings is true: the head is the "
        "token embedding, which has no LoRA adapter (drop 'head' from lora.targets)");
  }
  if ((o.targets_contain(model::LoraTarget::kMlpIn) ||
       o.targets_contain(model::LoraTarget::kMlpOut)) &&
      cfg.get_int("model.moe.num_experts") > 0) {
    throw UsageError(
        "config key 'lora.targets': mlp_in / mlp_out have no LoRA support on MoE models "
        "(model.moe.num_experts > 0); adapt attention (q, k, v, o) instead");
  }
  return o;
}

model::ModelOptions read_model_options(const core::Config& cfg, int64_t tokenizer_vocab) {
  model::ModelOptions m;
  m.shape = read_gpt_config(cfg, tokenizer_vocab);
  m.lora = read_lora_options(cfg);
  m.freeze_base = cfg.get_bool("model.temporal.enabled");
  m.checkpointing =
      model::CheckpointPolicy::parse(cfg.get_string("train.activation_checkpointing"));
  return m;
}

model::temporal::TemporalEncoderOptions read_temporal_encoder(const core::Config& cfg) {
  model::temporal::TemporalEncoderOptions o;
  o.channels = cfg.get_int("model.temporal.channels");
  o.max_length = cfg.get_int("model.temporal.max_length");
  o.patch_len = cfg.get_int("model.temporal.patch_len");
  o.stride = cfg.get_int("model.temporal.stride");
  o.layers = cfg.get_int("model.temporal.layers");
  o.width = cfg.get_int("model.temporal.width");
  o.heads = cfg.get_int("model.temporal.heads");
  o.mlp_ratio = cfg.get_int("model.temporal.mlp_ratio");
  o.num_tokens = cfg.get_int("model.temporal.num_tokens");
  o.projector = model::temporal::parse_projector_kind(cfg.get_string("model.temporal.projector"));
  return o;
}

}  // namespace lmtrain::options
