// The decoder's string-valued options (model.arch, model.norm, model.pos, model.mlp) as enums,
// read once by options::read_gpt_config. Each enum lists its enumerators in the order of the key's
// choices in core/config_schema.cpp, which stays the one place that spells them
// (core/config_choice.h: core::get_choice reads one, core::to_string names it).
#pragma once
#include "core/config_choice.h"

namespace lmtrain::model {

// The family a model is named as for Hugging Face import/export; the options below set the
// architecture itself.
enum class Arch { kGpt2, kLlama, kQwen2, kQwen3, kNanochat, kQwen3Moe, kMixtral };
enum class Norm { kLayerNorm, kRmsNorm };
enum class PosEncoding { kLearned, kRope };  // learned table (GPT-2) or rotary (RoPE)
// The MLP's nonlinearity: GELU-tanh; SwiGLU (c_fc holds [gate; up]: twice the hidden width);
// relu².
enum class MlpKind { kGelu, kSwiGlu, kRelu2 };

constexpr core::ChoiceKey choice_key(Arch) { return {"model.arch", 7}; }
constexpr core::ChoiceKey choice_key(Norm) { return {"model.norm", 2}; }
constexpr core::ChoiceKey choice_key(PosEncoding) { return {"model.pos", 2}; }
constexpr core::ChoiceKey choice_key(MlpKind) { return {"model.mlp", 3}; }

// Rows of c_fc for an MLP of hidden width `hidden` (SwiGLU packs gate and up).
constexpr int64_t mlp_fc_rows(MlpKind kind, int64_t hidden) {
  return kind == MlpKind::kSwiGlu ? 2 * hidden : hidden;
}

}  // namespace lmtrain::model
