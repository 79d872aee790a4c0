#include "checkpoint/lora_checkpoint.h"

#include <filesystem>

#include "checkpoint/training_checkpoint.h"
#include "core/error.h"
#include "core/log.h"
#include "core/sha256.h"

namespace fs = std::filesystem;

namespace lmtrain::train {
namespace {

bool has_frozen(const model::GptImpl& model) {
  for (const auto& [name, tag] : model.param_tags()) {
    if (!tag.trainable) return true;
  }
  return false;
}

// sha256 of a loaded checkpoint's model.safetensors, as its meta.json lists it (the load
// verified the file against it).
std::string model_hash(const LoadedCheckpoint& ckpt) {
  const auto& files = ckpt.meta.at("files");
  if (!files.contains("model.safetensors")) {
    throw Error("checkpoint " + ckpt.dir + " has no model.safetensors in its meta.json");
  }
  return files["model.safetensors"].at("sha256").get<std::string>();
}

}  // namespace

bool is_lora_checkpoint(const LoadedCheckpoint& ckpt) {
  return ckpt.meta.contains("lora_base") && !ckpt.meta["lora_base"].is_null();
}

void refuse_lora_init_source(const LoadedCheckpoint& src) {
  if (is_lora_checkpoint(src)) {
    throw UsageError("model.init_from = " + src.dir +
                     " is a LoRA checkpoint (adapters only): fold them into a full checkpoint "
                     "with `lmtrain lora merge --checkpoint " +
                     src.dir + " --output DIR` and start from DIR");
  }
}

nlohmann::json load_init_weights(model::GptImpl& model, const LoadedCheckpoint& src) {
  refuse_lora_init_source(src);
  const auto& file = src.files.at("model.safetensors");
  const std::string origin = src.dir + "/model.safetensors";
  if (!has_frozen(model)) {
    load_model_tensors(model, file, origin);
    return nullptr;
  }
  load_model_tensors(model, file, origin, ModelTensors::kBase);
  return {{"path", fs::canonical(src.dir).string()}, {"sha256", model_hash(src)}};
}

nlohmann::json load_checkpoint_weights(const LoadedCheckpoint& ckpt, model::GptImpl& model) {
  const auto& file = ckpt.files.at("model.safetensors");
  const std::string origin = ckpt.dir + "/model.safetensors";
  if (!is_lora_checkpoint(ckpt)) {
    load_model_tensors(model, file, origin);
    return nullptr;
  }
  const auto base_ref = checked_lora_base(ckpt);
  const std::string path = base_ref.at("path").get<std::string>();
  auto base = CheckpointStore::load(path, /*allow_fallback=*/false, {"model.safetensors"});
  load_model_tensors(model, base.files.at("model.safetensors"), path + "/model.safetensors",
                     ModelTensors::kBase);
  load_model_tensors(model, file, origin, ModelTensors::kCheckpointed);
  return base_ref;
}

nlohmann::json checked_lora_base(const LoadedCheckpoint& ckpt) {
  const auto base_ref = ckpt.meta.at("lora_base");
  const std::string path = base_ref.at("path").get<std::string>();
  const std::string recorded = base_ref.at("sha256").get<std::string>();
  if (!fs::exists(path + "/model.safetensors")) {
    throw Error("checkpoint " + ckpt.dir + " is a LoRA run whose base " + path + " (sha256 " +
                recorded + ") is no longer there: restore it at that path");
  }
  // The file itself: a base replaced by another model is named as such, whatever its
  // meta.json says.
  const std::string found = core::sha256_file_hex(path + "/model.safetensors");
  if (found != recorded) {
    throw Error("checkpoint " + ckpt.dir + " was trained on the LoRA base " + path +
                " with model.safetensors sha256 " + recorded + ", but that base now has sha256 " +
                found + ": a different base model; restore the original base at " + path);
  }
  return base_ref;
}

TensorList checkpoint_model_tensors(const model::GptImpl& model) {
  const auto& tags = model.param_tags();
  TensorList out;
  for (const auto& [name, t] : model.state_tensors()) {
    auto tag = tags.find(name);
    if (tag != tags.end() && !tag->second.trainable) continue;  // from the base
    out.emplace_back(name, t.detach());
  }
  return out;
}

}  // namespace lmtrain::train
