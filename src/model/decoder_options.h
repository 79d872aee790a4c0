// The decoder's string-valued options (model.arch, model.norm, model.pos, model.mlp,
// model.rope_scaling) as enums,
// read once by options::read_gpt_config. Each enum lists its enumerators in the order of the key's
// choices in core/config_schema.cpp, which stays the one place that spells them
// (core/config_choice.h: core::get_choice reads one, core::to_string names it).
#pragma once
#include "core/config_choice.h"

namespace lmtrain::model {

// The family a model is named as for Hugging Face import/export; the options below set the
// architecture itself.
enum class Arch { kGpt2, kLlama, kQwen2, kQwen3, kNanochat, kQwen3Moe, kMixtral, kMistral };
enum class Norm { kLayerNorm, kRmsNorm };
enum class PosEncoding { kLearned, kRope };  // learned table (GPT-2) or rotary (RoPE)
// The MLP's nonlinearity: GELU-tanh; SwiGLU (c_fc holds [gate; up]: twice the hidden width);
// relu².
enum class MlpKind { kGelu, kSwiGlu, kRelu2 };
// RoPE frequency scaling (model/rope_params.h), as transformers' ROPE_INIT_FUNCTIONS: none,
// linear (position interpolation), dynamic (NTK-aware, grown past the trained context), yarn,
// llama3 (Llama 3.1's smooth band between low and high frequencies).
enum class RopeType { kNone, kLinear, kDynamic, kYarn, kLlama3 };

constexpr core::ChoiceKey choice_key(Arch) { return {"model.arch", 8}; }
constexpr core::ChoiceKey choice_key(Norm) { return {"model.norm", 2}; }
constexpr core::ChoiceKey choice_key(PosEncoding) { return {"model.pos", 2}; }
constexpr core::ChoiceKey choice_key(MlpKind) { return {"model.mlp", 3}; }
constexpr core::ChoiceKey choice_key(RopeType) { return {"model.rope_scaling", 5}; }

// Rows of c_fc for an MLP of hidden width `hidden` (SwiGLU packs gate and up).
constexpr int64_t mlp_fc_rows(MlpKind kind, int64_t hidden) {
  return kind == MlpKind::kSwiGlu ? 2 * hidden : hidden;
}

}  // namespace lmtrain::model
