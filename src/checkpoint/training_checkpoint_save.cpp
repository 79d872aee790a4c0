// Writing a training checkpoint (checkpoint/training_checkpoint.h): rank 0's files, and the
// optimizer shards of the other ranks.
#include <filesystem>

#include "checkpoint/cpu_rng_state.h"
#include "checkpoint/lora_checkpoint.h"
#include "checkpoint/training_checkpoint.h"
#include "core/fs.h"

namespace lmtrain::train {

std::string save_training_checkpoint(CheckpointStore& store, const CheckpointInputs& in,
                                     std::optional<double> val_loss, double train_loss,
                                     std::optional<int64_t> ended_epoch) {
  // Expert parallelism always saves shards (in.shards): every tensor here is whole.
  TensorList model_tensors = checkpoint_model_tensors(in.model);
  TensorList optim_tensors = in.optimizer.state_tensors();
  optim_tensors.emplace_back(kRngTensor, cpu_rng_state());

  CheckpointFiles files;
  const std::string staging = CheckpointStore::staging_dir(store.run_dir(), in.state.step);
  if (in.shards) {
    // Shards only: this rank's in place of the gathered model, the others' moved in.
    files.tensor_files.emplace_back(model_shard_file(0), rank0_model_shard(*in.shards, in.model));
    TensorList moments = optim_shard_tensors(*in.shards, in.optimizer);
    moments.emplace_back(kRngTensor, cpu_rng_state());
    files.tensor_files.emplace_back(optim_shard_file(0), std::move(moments));
    if (in.shards->ep > 1) {  // EP rank 0's experts
      files.tensor_files.emplace_back(model_expert_file(0), expert_model_tensors(*in.shards));
      files.tensor_files.emplace_back(optim_expert_file(0),
                                      expert_optim_tensors(*in.shards, in.optimizer));
    }
    for (const auto& name : other_rank_shard_files(*in.shards)) {
      files.moved_files.emplace_back(name, staging + "/" + name);
    }
  } else {
    files.tensor_files.emplace_back("model.safetensors", std::move(model_tensors));
    files.tensor_files.emplace_back(optim_shard_file(0), std::move(optim_tensors));
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
    // One file per shard of the optimizer's layout: under HSDP a shard group's, not the world's.
    const int shard_files = in.optimizer.state_layout().value("world_size", in.world_size);
    for (int r = 1; r < shard_files; ++r) {
      files.moved_files.emplace_back(optim_shard_file(r), staging + "/" + optim_shard_file(r));
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
  core::write_safetensors(staging + "/" + optim_shard_file(rank), optimizer.state_tensors(),
                          {{"format", "pt"}});
}

}  // namespace lmtrain::train
