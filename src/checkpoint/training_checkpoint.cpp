// Restoring a training checkpoint (checkpoint/training_checkpoint.h); writing it is
// training_checkpoint_save.cpp, the model-shape check checkpoint_compat.cpp.
#include "checkpoint/training_checkpoint.h"

#include <filesystem>
#include <set>

#include "checkpoint/cpu_rng_state.h"
#include "checkpoint/local_lora_base.h"
#include "checkpoint/lora_checkpoint.h"
#include "checkpoint/saved_optimizer_files.h"
#include "checkpoint/sharded_reader.h"
#include "checkpoint/unsharded_local_read.h"
#include "core/error.h"
#include "core/log.h"
#include "core/safetensors_slice.h"

namespace lmtrain::train {

void load_model_tensors(model::GptImpl& model, const core::SafetensorsFile& file,
                        const std::string& origin, ModelTensors which) {
  load_model_tensors_from(
      model,
      [&file](const std::string& name) -> std::optional<at::Tensor> {
        auto it = file.tensors.find(name);
        if (it == file.tensors.end()) return std::nullopt;
        return it->second;
      },
      origin, which);
}

void load_model_tensors_from(model::GptImpl& model, const TensorByName& file,
                             const std::string& origin, ModelTensors which) {
  torch::NoGradGuard no_grad;
  const auto& tags = model.param_tags();
  const auto placement = model.expert_placement();
  for (auto& [name, t] : model.state_tensors()) {
    auto tag_it = tags.find(name);  // buffers have no tag: every set holds them
    if (tag_it != tags.end()) {
      if (which == ModelTensors::kBase && tag_it->second.lora) continue;
      if (which == ModelTensors::kCheckpointed && !tag_it->second.trainable) continue;
    }
    const std::optional<at::Tensor> saved = file(name);
    if (!saved) throw Error(origin + " has no tensor '" + name + "'");
    auto src = *saved;
    if (tag_it != tags.end() && tag_it->second.expert && src.dim() > 0 && src.size(0) > t.size(0) &&
        placement.first + placement.count <= src.size(0)) {
      src = src.narrow(0, placement.first, placement.count);  // expert-parallel: our experts
    }
    if (src.sizes() != t.sizes()) {
      throw Error(log::format("%s: tensor '%s' has shape %s, the model expects %s", origin.c_str(),
                              name.c_str(), c10::str(saved->sizes()).c_str(),
                              c10::str(t.sizes()).c_str()));
    }
    t.copy_(src);
  }
}

void load_objective_tensors(const LoadedCheckpoint& ckpt, torch::nn::Module& objective) {
  const auto it = ckpt.files.find(kObjectiveFile);
  // Not loaded by the caller (a resume reads by range): a small file, read whole here.
  std::optional<core::SafetensorsFile> read_here;
  if (it == ckpt.files.end() && ckpt.meta.contains("files") &&
      ckpt.meta["files"].contains(kObjectiveFile)) {
    read_here = core::read_safetensors(ckpt.dir + "/" + kObjectiveFile);
  } else if (it == ckpt.files.end() && sharded_logical_files(ckpt.meta).count(kObjectiveFile)) {
    read_here = assemble_sharded_file(ckpt.dir, ckpt.meta, kObjectiveFile);
  }
  const core::SafetensorsFile* file =
      read_here ? &*read_here : (it != ckpt.files.end() ? &it->second : nullptr);
  if (!file) {
    throw UsageError("checkpoint " + ckpt.dir + " has no " + kObjectiveFile +
                     ": it was saved without the parameters this objective trains (e.g. "
                     "distillation's feature projections or a temporal encoder); resume with the "
                     "run's own config");
  }
  torch::NoGradGuard no_grad;
  for (auto& item : objective.named_parameters()) {
    auto src = file->tensors.find(item.key());
    if (src == file->tensors.end() || src->second.sizes() != item.value().sizes()) {
      throw UsageError("checkpoint " + ckpt.dir + ": " + kObjectiveFile + " lacks '" + item.key() +
                       "' of shape " + c10::str(item.value().sizes()));
    }
    item.value().copy_(src->second);
  }
}

namespace {
void set_saved_rng_state(const LoadedCheckpoint& ckpt);
void restore_local_optimizer(const LoadedCheckpoint& ckpt, model::GptImpl& model,
                             optim::Optimizer& optimizer, const TensorLocalizer& localize);
void restore_named_or_flat_optimizer(const LoadedCheckpoint& ckpt, optim::Optimizer& optimizer);
nlohmann::json restore_model_weights(const LoadedCheckpoint& ckpt, model::GptImpl& model);
TrainingState training_state_of(const LoadedCheckpoint& ckpt, const nlohmann::json& lora_base);
}  // namespace

void load_local_model_tensors(const LoadedCheckpoint& ckpt, model::GptImpl& model,
                              const TensorLocalizer& localize) {
  const std::string origin = ckpt.dir + "/model.safetensors";
  if (has_model_shards(ckpt.meta)) {  // one tensor's part at a time
    load_model_tensors_from(
        model, sharded_tensor_reader(ckpt.dir, ckpt.meta, "model.safetensors", localize), origin);
    return;
  }
  load_model_tensors_from(model, local_model_reader(ckpt, localize), origin);
}

TrainingState restore_training_checkpoint(const LoadedCheckpoint& ckpt, model::GptImpl& model,
                                          optim::Optimizer& optimizer, torch::nn::Module* objective,
                                          const TensorLocalizer& localize) {
  const bool sharded = has_model_shards(ckpt.meta);
  if (localize) {
    // A tensor-parallel run reads only its part of the tensors, by range (a LoRA run's base
    // too; no objective parameters under TP): CheckpointStore::load may have read none of them.
    nlohmann::json lora_base;
    if (is_lora_checkpoint(ckpt)) {
      lora_base = load_local_lora_checkpoint(ckpt, model, localize);
    } else {
      load_local_model_tensors(ckpt, model, localize);
    }
    if (sharded) {
      restore_sharded_optimizer(ckpt.dir, ckpt.meta, optimizer, localize);
    } else {
      restore_local_optimizer(ckpt, model, optimizer, localize);
    }
    set_saved_rng_state(ckpt);
    return training_state_of(ckpt, lora_base);
  }
  // Everything by range from the files (CheckpointStore::load may have read none of them): the
  // parameters one tensor at a time into the model, the optimizer state only where this rank
  // keeps it (a ZeRO shard of the new layout), so a resume holds no second copy of the model
  // beside the one being restored.
  const nlohmann::json lora_base = restore_model_weights(ckpt, model);
  if (objective && !objective->parameters().empty()) load_objective_tensors(ckpt, *objective);
  if (sharded) {
    restore_sharded_optimizer(ckpt.dir, ckpt.meta, optimizer);
  } else {
    restore_named_or_flat_optimizer(ckpt, optimizer);
  }
  set_saved_rng_state(ckpt);
  return training_state_of(ckpt, lora_base);
}

TrainingState restore_shard_optimizer_and_state(const LoadedCheckpoint& ckpt,
                                                optim::Optimizer& optimizer,
                                                const TensorLocalizer& experts) {
  // The moments of the range this rank keeps (the parameters of the same range are read by
  // the caller, train/init_from_shard.h).
  if (has_model_shards(ckpt.meta)) {
    restore_sharded_optimizer(ckpt.dir, ckpt.meta, optimizer, experts);
  } else {
    restore_named_or_flat_optimizer(ckpt, optimizer);
  }
  set_saved_rng_state(ckpt);
  return training_state_of(ckpt, nullptr);
}

namespace {

// The CPU RNG state from optim.rank0.safetensors, read by range (absent in old checkpoints).
void set_saved_rng_state(const LoadedCheckpoint& ckpt) {
  const std::string path = ckpt.dir + "/" + optim_shard_file(0);
  for (const auto& e : core::read_safetensors_header(path).entries) {
    if (e.name == kRngTensor) set_cpu_rng_state(core::read_safetensors_slice(path, kRngTensor));
  }
}

// A tensor-parallel run takes its part of an unsharded checkpoint's optimizer state by
// parameter name, whatever layout saved it (checkpoint/unsharded_local_read.h): Adam moments
// straight into the optimizer's buffers, one tensor's part at a time; Muon's state all read.
void restore_local_optimizer(const LoadedCheckpoint& ckpt, model::GptImpl& model,
                             optim::Optimizer& optimizer, const TensorLocalizer& localize) {
  const auto& om = ckpt.meta.at("optimizer");
  const nlohmann::json layout = om.value("layout", nlohmann::json{{"kind", "named"}});
  const int64_t step = om.at("step").get<int64_t>();
  if (layout.value("kind", "named") == "muon") {
    optimizer.load_state({local_optimizer_state(ckpt, model, localize)}, layout, step);
    return;
  }
  optimizer.load_saved_state(*local_adam_moments(ckpt, model, localize),
                             nlohmann::json{{"kind", "named"}}, step);
}

void restore_named_or_flat_optimizer(const LoadedCheckpoint& ckpt, optim::Optimizer& optimizer) {
  const auto& om = ckpt.meta.at("optimizer");
  const nlohmann::json layout = om.value("layout", nlohmann::json{{"kind", "named"}});
  // Every rank's file of the checkpoint, whatever the world size it was written at, read by
  // range: the optimizer reads the part it keeps.
  const size_t files =
      layout.value("kind", "named") == "named" ? 1 : layout.at("world_size").get<size_t>();
  std::vector<std::string> paths;
  for (size_t r = 0; r < files; ++r) {
    const std::string name = optim_shard_file(static_cast<int>(r));
    if (!std::filesystem::is_regular_file(ckpt.dir + "/" + name)) {
      throw Error("checkpoint " + ckpt.dir + " lacks " + name +
                  " (its optimizer state was split over " + std::to_string(files) + " ranks)");
    }
    paths.push_back(ckpt.dir + "/" + name);
  }
  optimizer.load_saved_state(SavedOptimizerFiles(paths), layout, om.at("step").get<int64_t>());
}

// The parameters, each tensor read alone (a sharded checkpoint's from its byte ranges) unless the
// caller loaded model.safetensors; a LoRA checkpoint's (adapters only) through its base. Returns
// the LoRA base's reference, or null.
nlohmann::json restore_model_weights(const LoadedCheckpoint& ckpt, model::GptImpl& model) {
  const std::string origin = ckpt.dir + "/model.safetensors";
  const bool sharded = has_model_shards(ckpt.meta);
  if (ckpt.files.count("model.safetensors")) return load_checkpoint_weights(ckpt, model);
  if (!sharded && !std::filesystem::is_regular_file(origin)) {
    throw Error("checkpoint " + ckpt.dir + " lacks model.safetensors or optim.rank0.safetensors");
  }
  if (is_lora_checkpoint(ckpt)) {
    LoadedCheckpoint with_model = ckpt;
    with_model.files.emplace("model.safetensors",
                             sharded
                                 ? assemble_sharded_file(ckpt.dir, ckpt.meta, "model.safetensors")
                                 : core::read_safetensors(origin));
    return load_checkpoint_weights(with_model, model);
  }
  if (sharded) {
    load_model_tensors_from(model, sharded_tensor_reader(ckpt.dir, ckpt.meta, "model.safetensors"),
                            origin);
    return nullptr;
  }
  std::set<std::string> names;
  for (const auto& e : core::read_safetensors_header(origin).entries) names.insert(e.name);
  load_model_tensors_from(
      model,
      [&](const std::string& name) -> std::optional<at::Tensor> {
        if (!names.count(name)) return std::nullopt;
        return core::read_safetensors_slice(origin, name);
      },
      origin);
  return nullptr;
}

TrainingState training_state_of(const LoadedCheckpoint& ckpt, const nlohmann::json& lora_base) {
  TrainingState st;
  st.lora_base = lora_base;
  st.step = ckpt.meta.at("step").get<int64_t>();
  st.position.epoch = ckpt.meta.at("epoch").get<int64_t>();
  st.position.cursor = ckpt.meta.at("data_cursor").get<int64_t>();
  if (ckpt.meta.contains("stream")) st.stream = ckpt.meta["stream"];
  if (ckpt.meta.contains("loss_scale")) {
    const auto& ls = ckpt.meta["loss_scale"];
    LossScalerState s;
    s.scale = ls.value("scale", 1.0);
    s.good_steps = ls.value("good_steps", int64_t{0});
    s.skipped_steps = ls.value("skipped_steps", int64_t{0});
    st.loss_scale = s;
  }
  return st;
}

}  // namespace

}  // namespace lmtrain::train
