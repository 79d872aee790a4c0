// Mixture-of-Experts options (`model.moe.*`, read by options/read_model.h): which blocks get an MoE
// feed-forward, its sizes, the router, capacity and load balancing. num_experts = 0 is the dense
// model.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/config_choice.h"

namespace lmtrain::model {

enum class MoeGate { kSoftmax, kSigmoid };  // in the order of model.moe.gate's choices
constexpr core::ChoiceKey choice_key(MoeGate) { return {"model.moe.gate", 2}; }

struct MoeConfig {
  int64_t num_experts = 0;     // 0: dense model
  int64_t top_k = 2;           // experts per token
  int64_t expert_hidden = 0;   // hidden width of each expert (0: the dense MLP's hidden width)
  int64_t shared_experts = 0;  // always-on experts (DeepSeek), one MLP of shared * expert_hidden
  int64_t every = 1;           // MoE in layer l when (l + 1) % every == 0 (HF decoder_sparse_step)
  std::vector<int64_t> dense_layers;  // layers kept dense regardless (HF mlp_only_layers)
  MoeGate gate = MoeGate::kSoftmax;
  bool renormalize = true;      // top-k gate weights rescaled to sum to 1
  double capacity_factor = 0;   // 0: dropless; > 0: each expert takes ceil(cf * N * k / E) rows
  double aux_loss_coef = 0.01;  // Switch/GShard load-balancing loss weight
  double z_loss_coef = 0;       // router z-loss weight
  double bias_update_rate = 0;  // DeepSeek-V3 aux-loss-free bias step (0: off)

  bool enabled() const { return num_experts > 0; }
  bool is_moe_layer(int64_t layer) const;
  int64_t moe_layers(int64_t n_layer) const;
  std::string describe() const;
};

}  // namespace lmtrain::model
