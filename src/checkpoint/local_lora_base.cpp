#include "checkpoint/local_lora_base.h"

#include <filesystem>

#include "checkpoint/lora_checkpoint.h"
#include "checkpoint/training_checkpoint.h"
#include "checkpoint/unsharded_local_read.h"
#include "core/error.h"

namespace lmtrain::train {
namespace {

// This rank's part of a checkpoint's model.safetensors, whatever layout saved it, one tensor
// at a time as load_model_tensors_from asks for it.
TensorByName local_lora_file(const LoadedCheckpoint& ckpt, const TensorLocalizer& localize) {
  return has_model_shards(ckpt.meta)
             ? sharded_tensor_reader(ckpt.dir, ckpt.meta, "model.safetensors", localize)
             : local_model_reader(ckpt, localize);
}

bool local_lora_has_frozen(const model::GptImpl& model) {
  for (const auto& [name, tag] : model.param_tags()) {
    if (!tag.trainable) return true;
  }
  return false;
}

}  // namespace

nlohmann::json load_local_init_weights(const LoadedCheckpoint& src, model::GptImpl& model,
                                       const TensorLocalizer& localize) {
  refuse_lora_init_source(src);
  const std::string origin = src.dir + "/model.safetensors";
  if (!local_lora_has_frozen(model)) {
    load_model_tensors_from(model, local_lora_file(src, localize), origin);
    return nullptr;
  }
  load_model_tensors_from(model, local_lora_file(src, localize), origin, ModelTensors::kBase);
  const auto& files = src.meta.at("files");
  if (!files.contains("model.safetensors")) {
    throw Error("checkpoint " + src.dir + " has no model.safetensors in its meta.json");
  }
  return {{"path", std::filesystem::canonical(src.dir).string()},
          {"sha256", files["model.safetensors"].at("sha256").get<std::string>()}};
}

nlohmann::json load_local_lora_checkpoint(const LoadedCheckpoint& ckpt, model::GptImpl& model,
                                          const TensorLocalizer& localize) {
  const auto base_ref = checked_lora_base(ckpt);
  const std::string path = base_ref.at("path").get<std::string>();
  const std::string file = path + "/model.safetensors";
  const auto base = CheckpointStore::load(path, /*allow_fallback=*/false, {"model.safetensors"},
                                          /*tensors_by_range=*/true);
  load_model_tensors_from(model, local_lora_file(base, localize), file, ModelTensors::kBase);
  load_model_tensors_from(model, local_lora_file(ckpt, localize), ckpt.dir + "/model.safetensors",
                          ModelTensors::kCheckpointed);
  return base_ref;
}

}  // namespace lmtrain::train
