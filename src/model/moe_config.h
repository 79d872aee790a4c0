// Mixture-of-Experts options (`model.moe.*`, read by options/read_model.h): which blocks get an MoE
// feed-forward, its sizes, the router, capacity and load balancing. num_experts = 0 is the dense
// model.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/config_choice.h"
#include "core/config_schema.h"

namespace lmtrain::model {

enum class MoeGate { kSoftmax, kSigmoid };  // in the order of model.moe.gate's choices
constexpr core::ChoiceKey choice_key(MoeGate) { return {"model.moe.gate", 2}; }

// Each member starts at its key's schema default (core/config_schema.h).
struct MoeConfig {
  int64_t num_experts = core::default_int("model.moe.num_experts");  // 0: dense model
  int64_t top_k = core::default_int("model.moe.top_k");              // experts per token
  // Hidden width of each expert (0: the dense MLP's hidden width).
  int64_t expert_hidden = core::default_int("model.moe.expert_hidden");
  // Always-on experts (DeepSeek), one MLP of shared * expert_hidden.
  int64_t shared_experts = core::default_int("model.moe.shared_experts");
  // MoE in layer l when (l + 1) % every == 0 (HF decoder_sparse_step).
  int64_t every = core::default_int("model.moe.every");
  std::vector<int64_t> dense_layers;  // layers kept dense regardless (HF mlp_only_layers)
  MoeGate gate = core::default_choice<MoeGate>();
  // Top-k gate weights rescaled to sum to 1.
  bool renormalize = core::default_bool("model.moe.renormalize");
  // 0: dropless; > 0: each expert takes ceil(cf * N * k / E) rows.
  double capacity_factor = core::default_float("model.moe.capacity_factor");
  // Switch/GShard load-balancing loss weight.
  double aux_loss_coef = core::default_float("model.moe.aux_loss_coef");
  double z_loss_coef = core::default_float("model.moe.z_loss_coef");  // router z-loss weight
  // DeepSeek-V3 aux-loss-free bias step (0: off).
  double bias_update_rate = core::default_float("model.moe.bias_update_rate");

  bool enabled() const { return num_experts > 0; }
  bool is_moe_layer(int64_t layer) const;
  int64_t moe_layers(int64_t n_layer) const;
  std::string describe() const;
};

}  // namespace lmtrain::model
