// What RoPE needs besides the head width: the base and the frequency scaling, as transformers'
// ROPE_INIT_FUNCTIONS (modeling_rope_utils.py) take them from a config's rope_parameters
// (4.x: rope_scaling). model.rope_theta and the model.rope_* keys; rope.h computes the tables.
#pragma once
#include <cstdint>

#include "model/decoder_options.h"

namespace lmtrain::model {

struct RopeScaling {
  RopeType type = RopeType::kNone;
  // linear, dynamic, yarn, llama3: how much longer the context is than the trained one.
  double factor = 1;
  // llama3, yarn: the pretraining context (HF original_max_position_embeddings); dynamic: the
  // length past which the base grows (HF max_position_embeddings). 0: model.block_size.
  int64_t original_max = 0;
  double low_freq_factor = 1, high_freq_factor = 4;  // llama3
  double beta_fast = 32, beta_slow = 1;              // yarn
  // yarn: cos and sin are multiplied by it; 0 = 0.1 ln(factor) + 1 (HF's default).
  double attention_factor = 0;
  bool truncate = true;  // yarn: floor/ceil the correction range

  bool operator==(const RopeScaling& o) const {
    return type == o.type && factor == o.factor && original_max == o.original_max &&
           low_freq_factor == o.low_freq_factor && high_freq_factor == o.high_freq_factor &&
           beta_fast == o.beta_fast && beta_slow == o.beta_slow &&
           attention_factor == o.attention_factor && truncate == o.truncate;
  }
  bool operator!=(const RopeScaling& o) const { return !(*this == o); }
};

struct RopeParams {
  double theta = 10000;
  RopeScaling scaling;

  // Implicit from a base alone: plain RoPE (the many callers that know only theta).
  RopeParams(double base = 10000, RopeScaling s = {}) : theta(base), scaling(s) {}  // NOLINT
  bool operator==(const RopeParams& o) const { return theta == o.theta && scaling == o.scaling; }
  bool operator!=(const RopeParams& o) const { return !(*this == o); }
  // Whether the tables depend on the sequence length (dynamic NTK past original_max).
  bool dynamic() const { return scaling.type == RopeType::kDynamic; }
};

}  // namespace lmtrain::model
