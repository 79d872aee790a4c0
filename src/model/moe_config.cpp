#include "model/moe_config.h"

#include <algorithm>

#include "core/log.h"

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
