// The one place a model is constructed: train, bench, eval, generate and HF import/export all
// call build_model, so shape facts, initialisation, placement and activation checkpointing are
// decided once.
#pragma once
#include <cstdint>

#include "core/runtime.h"
#include "model/activation_checkpoint.h"
#include "model/gpt.h"
#include "model/lora.h"

namespace lmtrain::model {

// What build_model makes, typed: read from a run's config or a checkpoint's config snapshot by
// options/read_model.h.
struct ModelOptions {
  GptConfig shape;                 // model.* (vocab_size filled in)
  LoraOptions lora;                // lora.*: rank 0 = none
  bool freeze_base = false;        // model.temporal.enabled: the decoder is frozen (without LoRA)
  CheckpointPolicy checkpointing;  // train.activation_checkpointing
};

struct BuildOptions {
  // false: weights are left unwritten (never-touched memory), for counting, shape checks and
  // models about to be loaded from a checkpoint.
  bool init = true;
  // The routed experts this process holds (expert parallelism); default: all.
  ExpertPlacement experts;
};

// Builds the model `model` describes and places it on rt.device in rt.param_dtype.
// Initialisation runs on the CPU with the global CPU generator (seed it first), so the same
// seed gives the same initial weights on every device. Applies the activation checkpointing
// and, with a LoRA rank > 0, LoRA (model/lora.h: the base frozen, adapters attached); without
// LoRA, freeze_base freezes the whole decoder (a temporal run: the encoder is the objective's).
Gpt build_model(const ModelOptions& model, const core::Runtime& rt, const BuildOptions& opts = {});

}  // namespace lmtrain::model
