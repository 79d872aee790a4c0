// RoPE scaling and sliding-window attention between config.json and lmtrain's model.* keys
// (model.rope_theta, model.rope_scaling and model.rope_*, model.windows), both directions, in
// both config styles (interop/hf_config_read.cpp says which; hf_rope.cpp and hf_window.cpp
// implement these).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "model/gpt_config.h"

namespace lmtrain::model::hf {

using Overrides = std::vector<std::pair<std::string, std::string>>;

// model.rope_theta and model.rope_* from rope_scaling (4.x; 5.x lets it win too) or
// rope_parameters (5.x), as transformers' standardize_rope_params fills them in. max_pos:
// max_position_embeddings. Types lmtrain lacks (longrope, ...), per-layer-type RoPE and a
// partial rotary dimension are a UsageError naming them.
Overrides rope_overrides(const nlohmann::json& j, int64_t max_pos);

// model.windows of the family's sliding window: Mistral and Mixtral slide every layer when
// sliding_window is set; Qwen2 and Qwen3 slide the layers layer_types names (4.x: the layers
// from max_window_layers on) when use_sliding_window is true. A window as long as the context
// changes nothing and gives none. Qwen3-MoE's windows are refused.
Overrides window_overrides(const nlohmann::json& j, Arch type, int64_t n_layer, int64_t context);

// config.json's rope_theta, rope_scaling (4.x) and rope_parameters (5.x) for c; dynamic scaling
// also sets max_position_embeddings (HF grows the base past it).
void write_rope(nlohmann::json& j, const GptConfig& c);
// config.json's sliding-window keys for c's family; a window pattern the family cannot express
// is a UsageError naming model.windows.
void write_windows(nlohmann::json& j, const GptConfig& c);

}  // namespace lmtrain::model::hf
