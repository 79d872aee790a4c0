// Checkpoints of LoRA runs (model/lora.h). Their model.safetensors holds only what was trained
// (the adapters and any other trainable parameter, plus buffers); the frozen base is recorded in
// meta.json as "lora_base": {"path": absolute checkpoint dir, "sha256": of its
// model.safetensors}, and reloaded from there (hash verified) on resume, generate, eval, merge
// and export. A base is an ordinary checkpoint: an lmtrain run's or an `lmtrain import hf`.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "checkpoint/checkpoint_store.h"
#include "model/gpt.h"

namespace lmtrain::train {

// model.init_from into a freshly built model. An ordinary model takes every tensor; a LoRA
// model every base tensor (all but the adapters, which keep their init) and gets back the
// base's {"path", "sha256"} (null for an ordinary model). A LoRA checkpoint as the source is a
// UsageError (merge it first).
nlohmann::json load_init_weights(model::GptImpl& model, const LoadedCheckpoint& src);

// The UsageError of load_init_weights for a LoRA checkpoint as model.init_from (callers check
// it before comparing configs, whose lora keys would differ first).
void refuse_lora_init_source(const LoadedCheckpoint& src);

// A checkpoint's weights into a model built from its config: everything for an ordinary
// checkpoint; for a LoRA checkpoint the base from meta.json's lora_base (a different hash than
// recorded is an Error naming both) and then the checkpoint's own tensors. Returns lora_base
// (null for an ordinary checkpoint).
nlohmann::json load_checkpoint_weights(const LoadedCheckpoint& ckpt, model::GptImpl& model);

// The base a LoRA checkpoint was trained on, meta.json's lora_base {"path", "sha256"}, after
// checking that its model.safetensors is still at that path with the recorded sha256 (an
// Error naming the checkpoint, the base and both hashes otherwise). Every resume of a LoRA
// checkpoint checks it first (whole, under TP, into ZeRO-3's shards).
nlohmann::json checked_lora_base(const LoadedCheckpoint& ckpt);

// What a training checkpoint of `model` stores in model.safetensors: every parameter and buffer;
// with frozen parameters, only the trainable ones and the buffers.
TensorList checkpoint_model_tensors(const model::GptImpl& model);

// True when the checkpoint is a LoRA run's (holds adapters + a base reference).
bool is_lora_checkpoint(const LoadedCheckpoint& ckpt);

}  // namespace lmtrain::train
