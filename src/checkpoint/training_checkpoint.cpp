#include "checkpoint/training_checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>

#include <filesystem>
#include <map>
#include <mutex>

#include "checkpoint/checkpoint_config.h"
#include "checkpoint/lora_checkpoint.h"
#include "checkpoint/sharded_reader.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/safetensors_slice.h"
#include "options/read_model.h"

namespace lmtrain::train {
namespace {

constexpr const char* kRngTensor = "rng.cpu_state";
constexpr const char* kObjectiveFile = "objective.safetensors";

std::string optim_file_name(int rank) { return optim_shard_file(rank); }

at::Tensor cpu_rng_state() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_cpu_rng_state(const at::Tensor& state) {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

}  // namespace

std::string save_training_checkpoint(CheckpointStore& store, const CheckpointInputs& in,
                                     std::optional<double> val_loss, double train_loss,
                                     std::optional<int64_t> ended_epoch) {
  TensorList model_tensors = checkpoint_model_tensors(in.model);
  TensorList optim_tensors = in.optimizer.state_tensors();
  // Whole expert stacks in place of this rank's slices; a sharded optimizer's expert state
  // (not among its shards) joins rank 0's file.
  for (const auto& [name, full] : in.full_experts) {
    bool placed = false;
    for (auto* list : {&model_tensors, &optim_tensors}) {
      for (auto& [n, t] : *list) {
        if (n == name) {
          t = full;
          placed = true;
        }
      }
    }
    if (!placed) optim_tensors.emplace_back(name, full);
  }
  optim_tensors.emplace_back(kRngTensor, cpu_rng_state());

  CheckpointFiles files;
  const std::string staging = CheckpointStore::staging_dir(store.run_dir(), in.state.step);
  if (in.shards) {
    // Shards only: this rank's in place of the gathered model, the others' moved in.
    files.tensor_files.emplace_back(model_shard_file(0), rank0_model_shard(*in.shards, in.model));
    TensorList moments = flat_moments(*in.shards, in.optimizer);
    moments.emplace_back(kRngTensor, cpu_rng_state());
    files.tensor_files.emplace_back(optim_file_name(0), std::move(moments));
    for (const auto& name : other_rank_shard_files(*in.shards)) {
      files.moved_files.emplace_back(name, staging + "/" + name);
    }
  } else {
    files.tensor_files.emplace_back("model.safetensors", std::move(model_tensors));
    files.tensor_files.emplace_back(optim_file_name(0), std::move(optim_tensors));
  }
  if (!in.shards && in.objective && !in.objective->parameters().empty()) {
    TensorList objective_tensors;
    for (const auto& item : in.objective->named_parameters()) {
      objective_tensors.emplace_back(item.key(), item.value());
    }
    files.tensor_files.emplace_back(kObjectiveFile, std::move(objective_tensors));
  }
  files.raw_files.emplace_back("tokenizer.json", in.tokenizer_json);
  if (in.optimizer.sharded() && !in.shards) {
    for (int r = 1; r < in.world_size; ++r) {
      files.moved_files.emplace_back(optim_file_name(r), staging + "/" + optim_file_name(r));
    }
  }

  nlohmann::json meta = {
      {"epoch", in.state.position.epoch},
      {"data_cursor", in.state.position.cursor},
      {"world_size", in.world_size},
      {"optimizer",
       {{"name", in.optimizer.name()},
        {"step", in.optimizer.step_count()},
        {"layout", in.optimizer.state_layout()}}},
      {"tokenizer_hash", in.tokenizer_hash},
      {"train_loss", train_loss},
      {"config", in.config_yaml},
      {"model", in.model.config().describe()},
  };
  if (in.shards) meta["model_shards"] = model_shards_meta(*in.shards, in.model);
  if (!in.state.lora_base.is_null()) meta["lora_base"] = in.state.lora_base;
  if (!in.state.stream.is_null()) meta["stream"] = in.state.stream;
  if (in.state.loss_scale) {
    meta["loss_scale"] = {{"scale", in.state.loss_scale->scale},
                          {"good_steps", in.state.loss_scale->good_steps},
                          {"skipped_steps", in.state.loss_scale->skipped_steps}};
  }
  auto dir = store.save(in.state.step, files, std::move(meta), val_loss, ended_epoch);
  std::error_code ec;
  std::filesystem::remove_all(staging, ec);
  return dir;
}

void write_optimizer_shard(const std::string& run_dir, int64_t step, int rank,
                           const optim::Optimizer& optimizer) {
  const std::string staging = CheckpointStore::staging_dir(run_dir, step);
  core::ensure_dir(staging);
  core::write_safetensors(staging + "/" + optim_file_name(rank), optimizer.state_tensors(),
                          {{"format", "pt"}});
}

int64_t checkpoint_seq_len(const LoadedCheckpoint& ckpt) {
  return checkpoint_config(ckpt).get_int("data.seq_len");
}

model::ModelOptions checkpoint_model_options(const LoadedCheckpoint& ckpt) {
  return options::read_model_options(checkpoint_config(ckpt), 0);
}

namespace {

// "4 on q,v (unfreeze: norms)": what the adapters' shapes and the trained base groups depend on.
std::string lora_shape(const model::LoraOptions& lora) {
  std::string unfreeze;
  const std::pair<bool, const char*> groups[] = {{lora.unfreeze_norms, "norms"},
                                                 {lora.unfreeze_embeddings, "embeddings"},
                                                 {lora.unfreeze_head, "head"}};
  for (const auto& [on, name] : groups) {
    if (on) unfreeze += (unfreeze.empty() ? "" : ",") + std::string(name);
  }
  return std::to_string(lora.rank) + " on " + model::lora_target_list(lora.targets) +
         " (unfreeze: " + unfreeze + ")";
}

}  // namespace

void check_model_compatible(const LoadedCheckpoint& ckpt, const model::ModelOptions& model) {
  // Compare the architectures the two resolve to (so mlp_hidden 0 and 4 * n_embd, or a
  // depth-sized nanochat and its explicit shape, agree); dropout, init and init_from may differ.
  const auto saved = checkpoint_model_options(ckpt);
  const auto& a = saved.shape;
  auto b = model.shape;
  if (b.vocab_size == 0) b.vocab_size = a.vocab_size;
  std::string diffs;
  auto cmp = [&](const char* key, const std::string& x, const std::string& y) {
    if (x != y)
      diffs += std::string("\n  model.") + key + ": checkpoint has " + x + ", config has " + y;
  };
  auto n = [](auto v) { return c10::str(v); };
  cmp("n_layer", n(a.n_layer), n(b.n_layer));
  cmp("n_embd", n(a.n_embd), n(b.n_embd));
  cmp("n_head", n(a.n_head), n(b.n_head));
  cmp("n_kv_head", n(a.kv_heads()), n(b.kv_heads()));
  cmp("head_dim", n(a.head_dim()), n(b.head_dim()));
  cmp("mlp_hidden", n(a.hidden_dim()), n(b.hidden_dim()));
  cmp("vocab_size", n(a.vocab_size), n(b.vocab_size));
  if (a.learned_pos() || b.learned_pos()) cmp("block_size", n(a.block_size), n(b.block_size));
  cmp("norm", core::to_string(a.norm), core::to_string(b.norm));
  cmp("pos", core::to_string(a.pos), core::to_string(b.pos));
  cmp("mlp", core::to_string(a.mlp), core::to_string(b.mlp));
  cmp("bias", n(a.bias), n(b.bias));
  cmp("qkv_bias", n(a.qkv_bias), n(b.qkv_bias));
  cmp("qk_norm", n(a.qk_norm), n(b.qk_norm));
  cmp("tie_embeddings", n(a.tie_embeddings), n(b.tie_embeddings));
  cmp("rope_theta", n(a.rope_theta), n(b.rope_theta));
  cmp("rope_scaling", model::describe_rope(a.rope_params()), model::describe_rope(b.rope_params()));
  cmp("windows", model::describe_windows(a), model::describe_windows(b));
  cmp("logit_softcap", n(a.logit_softcap), n(b.logit_softcap));
  cmp("moe.num_experts", n(a.moe.num_experts), n(b.moe.num_experts));
  if (a.moe.enabled() && b.moe.enabled()) {
    cmp("moe.expert_hidden", n(a.moe.expert_hidden), n(b.moe.expert_hidden));
    cmp("moe.shared_experts", n(a.moe.shared_experts), n(b.moe.shared_experts));
    cmp("moe.every", n(a.moe.every), n(b.moe.every));
    cmp("moe.dense_layers", n(a.moe.moe_layers(a.n_layer)), n(b.moe.moe_layers(b.n_layer)));
  }
  // LoRA: the adapters must have the shapes the checkpoint holds (a fresh run from a base
  // compares only the model; the base has no lora keys set).
  if (saved.lora.enabled() && lora_shape(saved.lora) != lora_shape(model.lora)) {
    diffs += "\n  lora.rank on lora.targets (lora.unfreeze): checkpoint has " +
             lora_shape(saved.lora) + ", config has " + lora_shape(model.lora);
  }
  if (!diffs.empty()) {
    throw UsageError("checkpoint " + ckpt.dir +
                     " is incompatible with this config (different model shape):" + diffs);
  }
}

void load_model_tensors(model::GptImpl& model, const core::SafetensorsFile& file,
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
    auto it = file.tensors.find(name);
    if (it == file.tensors.end()) {
      throw Error(origin + " has no tensor '" + name + "'");
    }
    auto src = it->second;
    auto tag = tags.find(name);
    if (tag != tags.end() && tag->second.expert && src.dim() > 0 && src.size(0) > t.size(0) &&
        placement.first + placement.count <= src.size(0)) {
      src = src.narrow(0, placement.first, placement.count);  // expert-parallel: our experts
    }
    if (src.sizes() != t.sizes()) {
      throw Error(log::format("%s: tensor '%s' has shape %s, the model expects %s", origin.c_str(),
                              name.c_str(), c10::str(it->second.sizes()).c_str(),
                              c10::str(t.sizes()).c_str()));
    }
    t.copy_(src);
  }
}

void load_objective_tensors(const LoadedCheckpoint& ckpt, torch::nn::Module& objective) {
  auto it = ckpt.files.find(kObjectiveFile);
  if (it == ckpt.files.end()) {
    throw UsageError("checkpoint " + ckpt.dir + " has no " + kObjectiveFile +
                     ": it was saved without the parameters this objective trains (e.g. "
                     "distillation's feature projections or a temporal encoder); resume with the "
                     "run's own config");
  }
  torch::NoGradGuard no_grad;
  for (auto& item : objective.named_parameters()) {
    auto src = it->second.tensors.find(item.key());
    if (src == it->second.tensors.end() || src->second.sizes() != item.value().sizes()) {
      throw UsageError("checkpoint " + ckpt.dir + ": " + kObjectiveFile + " lacks '" + item.key() +
                       "' of shape " + c10::str(item.value().sizes()));
    }
    item.value().copy_(src->second);
  }
}

namespace {
void restore_named_or_flat_optimizer(const LoadedCheckpoint& ckpt, optim::Optimizer& optimizer,
                                     const TensorLocalizer& localize);
TrainingState training_state_of(const LoadedCheckpoint& ckpt, const nlohmann::json& lora_base);
}  // namespace

TrainingState restore_training_checkpoint(const LoadedCheckpoint& ckpt, model::GptImpl& model,
                                          optim::Optimizer& optimizer, torch::nn::Module* objective,
                                          const TensorLocalizer& localize) {
  // A sharded checkpoint's model.safetensors was assembled by CheckpointStore::load; its
  // optimizer state is read here, by range, from the shard files.
  const bool sharded = has_model_shards(ckpt.meta);
  auto model_it = ckpt.files.find("model.safetensors");
  auto optim_it = ckpt.files.find(optim_file_name(0));
  if (model_it == ckpt.files.end() || (!sharded && optim_it == ckpt.files.end())) {
    throw Error("checkpoint " + ckpt.dir + " lacks model.safetensors or optim.rank0.safetensors");
  }
  nlohmann::json lora_base;
  if (localize) {
    // A tensor-parallel run: this rank's slices of the whole tensors (no LoRA under TP).
    core::SafetensorsFile local;
    for (const auto& name : model_it->second.names) {
      local.names.push_back(name);
      local.tensors.emplace(name, localize(name, model_it->second.tensors.at(name)));
    }
    load_model_tensors(model, local, ckpt.dir + "/model.safetensors");
  } else {
    lora_base = load_checkpoint_weights(ckpt, model);
  }
  if (objective && !objective->parameters().empty()) load_objective_tensors(ckpt, *objective);

  if (sharded) {
    restore_sharded_optimizer(ckpt.dir, ckpt.meta, optimizer, localize);
    set_cpu_rng_state(
        core::read_safetensors_slice(ckpt.dir + "/" + optim_file_name(0), kRngTensor));
  } else {
    restore_named_or_flat_optimizer(ckpt, optimizer, localize);
  }
  return training_state_of(ckpt, lora_base);
}

namespace {

void restore_named_or_flat_optimizer(const LoadedCheckpoint& ckpt, optim::Optimizer& optimizer,
                                     const TensorLocalizer& localize) {
  const auto& ot = ckpt.files.at(optim_file_name(0)).tensors;
  const auto& om = ckpt.meta.at("optimizer");
  const nlohmann::json layout = om.value("layout", nlohmann::json{{"kind", "named"}});
  if (localize) {
    // A tensor-parallel run takes its slices of moments saved by parameter name.
    if (layout.value("kind", "named") != "named") {
      throw UsageError("checkpoint " + ckpt.dir +
                       " holds ZeRO-1/2 optimizer shards of the whole model's flat layout, "
                       "which a tensor-parallel run (dist.tp > 1) does not cut into slices: "
                       "resume it at dist.tp=1 first (a checkpoint saved there with dist.zero=0 "
                       "or 3 resumes under dist.tp)");
    }
    optim::NamedTensors local;
    for (const auto& [name, t] : ot) {
      if (name == kRngTensor) continue;
      const auto dot = name.find('.');
      local.emplace_back(name, dot == std::string::npos ? t : localize(name.substr(dot + 1), t));
    }
    optimizer.load_state({local}, layout, om.at("step").get<int64_t>());
    auto rng = ot.find(kRngTensor);
    if (rng != ot.end()) set_cpu_rng_state(rng->second);
    return;
  }
  // Every rank's file of the checkpoint, whatever the world size it was written at.
  const size_t files =
      layout.value("kind", "named") == "named" ? 1 : layout.at("world_size").get<size_t>();
  std::vector<optim::NamedTensors> rank_files;
  for (size_t r = 0; r < files; ++r) {
    auto it = ckpt.files.find(optim_file_name(static_cast<int>(r)));
    if (it == ckpt.files.end()) {
      throw Error("checkpoint " + ckpt.dir + " lacks " + optim_file_name(static_cast<int>(r)) +
                  " (its optimizer state was split over " + std::to_string(files) + " ranks)");
    }
    rank_files.emplace_back(it->second.tensors.begin(), it->second.tensors.end());
  }
  optimizer.load_state(rank_files, layout, om.at("step").get<int64_t>());
  auto rng = ot.find(kRngTensor);
  if (rng != ot.end()) set_cpu_rng_state(rng->second);
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
