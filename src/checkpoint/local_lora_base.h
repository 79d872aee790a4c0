// Tensor parallelism (dist.tp > 1) with LoRA (model/lora.h): every rank reads only its slices
// of the frozen base, by range (sharded_reader.h's TensorLocalizer), from an unsharded or
// sharded checkpoint alike, as it reads a model's weights without LoRA; the adapters of a
// LoRA checkpoint the same way. The base is recorded in meta.json as lora_checkpoint.h says.
#pragma once
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_store.h"
#include "checkpoint/sharded_reader.h"
#include "model/gpt.h"

namespace lmtrain::train {

// model.init_from: this rank's part of every tensor of an ordinary model, or of the base of a
// LoRA model (all but the adapters, which keep their init). Returns the base reference
// {"path", "sha256"} for a LoRA model, null otherwise (load_init_weights' contract).
nlohmann::json load_local_init_weights(const LoadedCheckpoint& src, model::GptImpl& model,
                                       const TensorLocalizer& localize);

// A LoRA checkpoint resumed under TP: the base from meta.json's lora_base (its model.safetensors
// hash checked against the recorded one), then the checkpoint's own tensors (adapters and what
// else was trained), each rank its part. Returns lora_base.
nlohmann::json load_local_lora_checkpoint(const LoadedCheckpoint& ckpt, model::GptImpl& model,
                                          const TensorLocalizer& localize);

}  // namespace lmtrain::train
