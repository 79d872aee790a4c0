// The one place the string-keyed config (core/config.h) becomes the model's typed options: its
// shape and MoE layers, LoRA, activation checkpointing, the temporal encoder. The commands read a
// run's config through it (cli/read_options.h), and checkpoint loading the config snapshot a
// checkpoint records (checkpoint/checkpoint_config.h), so model/ itself never sees a Config.
// Every error is a UsageError naming the key.
#pragma once
#include <cstdint>

#include "model/build_model.h"
#include "model/gpt_config.h"
#include "model/lora.h"
#include "model/moe_config.h"
#include "model/temporal/temporal_options.h"

namespace lmtrain::core {
class Config;
}

namespace lmtrain::options {

// tokenizer_vocab for a model whose tokenizer is opened later: vocab_size stays as set (0 until
// GptConfig::fill_vocab_size).
inline constexpr int64_t kTokenizerLater = -1;

// model.* (with model.depth's sizing); `tokenizer_vocab` fills model.vocab_size = 0
// (GptConfig::fill_vocab_size). Also refuses a data.seq_len beyond model.block_size.
model::GptConfig read_gpt_config(const core::Config& cfg, int64_t tokenizer_vocab);
// model.moe.*; `dense_hidden` fills expert_hidden = 0.
// model.window_pattern (nanochat's "SSSL"): the per-layer windows model.windows holds, for a
// context of `context` tokens. nanochat's window w (FA3 window_size=(w, 0): key j is seen when
// i - j <= w) is lmtrain's w + 1 (the last w + 1 keys, the query's own included); a short window
// is ceil(context / 4 / 128) * 128, a long one the whole context (0); the last layer is long.
// "" gives none; anything but S and L is a UsageError naming the key.
std::vector<int64_t> windows_from_pattern(const std::string& pattern, int64_t n_layer,
                                          int64_t context);
model::MoeConfig read_moe_config(const core::Config& cfg, int64_t n_layer, int64_t dense_hidden);
// lora.*, validated against the model's keys. (What LoRA needs of the optimizer and of expert
// parallelism the command checks: cli/read_options.cpp.)
model::LoraOptions read_lora_options(const core::Config& cfg);
// What build_model makes: read_gpt_config, read_lora_options, the frozen base of a temporal run
// (model.temporal.enabled), train.activation_checkpointing.
model::ModelOptions read_model_options(const core::Config& cfg, int64_t tokenizer_vocab);
// model.temporal.*; lm_width and lm_vocab are left 0 (the LM's: train::encoder_for_lm).
model::temporal::TemporalEncoderOptions read_temporal_encoder(const core::Config& cfg);

}  // namespace lmtrain::options
