// The one place a model is constructed: train, bench, eval, generate and HF import/export all
// call build_model, so shape facts, initialisation, placement and activation checkpointing are
// decided once.
#pragma once
#include <cstdint>

#include "core/runtime.h"
#include "model/gpt.h"

namespace lmtrain::core {
class Config;
}

namespace lmtrain::model {

struct BuildOptions {
  // false: weights are left unwritten (never-touched memory), for counting, shape checks and
  // models about to be loaded from a checkpoint.
  bool init = true;
  // Fills model.vocab_size = 0 (see GptConfig::from_config); 0 = the config must set it.
  int64_t tokenizer_vocab = 0;
  // The routed experts this process holds (expert parallelism); default: all.
  ExpertPlacement experts;
};

// Builds the `model` section of `cfg` and places it on rt.device in rt.param_dtype.
// Initialisation runs on the CPU with the global CPU generator (seed it first), so the same
// seed gives the same initial weights on every device. Applies train.activation_checkpointing
// and, with lora.rank > 0, LoRA (model/lora.h: the base frozen, adapters attached); without
// LoRA, model.temporal.enabled freezes the whole decoder (the encoder is the objective's).
Gpt build_model(const core::Config& cfg, const core::Runtime& rt, const BuildOptions& opts = {});

}  // namespace lmtrain::model
