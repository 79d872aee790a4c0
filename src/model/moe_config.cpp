#include "model/moe_config.h"

#include <algorithm>

#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "core/text_list.h"

namespace lmtrain::model {

bool MoeConfig::is_moe_layer(int64_t layer) const {
  if (!enabled() || (layer + 1) % every != 0) return false;
  return std::find(dense_layers.begin(), dense_layers.end(), layer) == dense_layers.end();
}

int64_t MoeConfig::moe_layers(int64_t n_layer) const {
  int64_t n = 0;
  for (int64_t l = 0; l < n_layer; ++l) n += is_moe_layer(l) ? 1 : 0;
  return n;
}

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

}  // namespace

MoeConfig MoeConfig::from_config(const core::Config& cfg, int64_t n_layer, int64_t dense_hidden) {
  MoeConfig m;
  m.num_experts = cfg.get_int("model.moe.num_experts");
  m.top_k = cfg.get_int("model.moe.top_k");
  m.expert_hidden = cfg.get_int("model.moe.expert_hidden");
  if (m.expert_hidden == 0) m.expert_hidden = dense_hidden;
  m.shared_experts = cfg.get_int("model.moe.shared_experts");
  m.every = cfg.get_int("model.moe.every");
  m.dense_layers = parse_layer_list(cfg.get_string("model.moe.dense_layers"), n_layer);
  m.gate = core::get_choice<MoeGate>(cfg);
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

std::string MoeConfig::describe() const {
  if (!enabled()) return "";
  std::string s = log::format("MoE %lld experts top-%lld, expert hidden %lld",
                              (long long)num_experts, (long long)top_k, (long long)expert_hidden);
  if (shared_experts > 0) s += log::format(", %lld shared", (long long)shared_experts);
  if (every > 1) s += log::format(", every %lld layers", (long long)every);
  s += gate == MoeGate::kSigmoid ? ", sigmoid gate" : ", softmax gate";
  s += capacity_factor > 0 ? log::format(", capacity factor %g", capacity_factor) : ", dropless";
  if (bias_update_rate > 0) s += log::format(", bias rate %g", bias_update_rate);
  return s;
}

}  // namespace lmtrain::model
