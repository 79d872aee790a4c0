// What a training checkpoint holds and how it is restored:
//   model.safetensors        parameters by name (Hugging Face GPT-2 names, weights (out, in));
//                            a LoRA run's: only the trainable ones (checkpoint/lora_checkpoint.h)
//   optim.rank0.safetensors  optimizer state (replicated AdamW: moments by parameter name),
//                            CPU RNG state
//   optim.rankN.safetensors  rank N's shard of the optimizer state, for a sharded optimizer
//                            (written by rank N into a staging dir, moved in by rank 0)
//   model.rankN.safetensors  ZeRO-3 over several ranks, tensor parallelism (dist.tp) or expert
//                            parallelism (dist.ep): rank N's shard of its flat parameters
//                            (under TP: of its slices; under EP: of the shared region), in
//                            place of model.safetensors (and of objective.safetensors), with
//                            meta.json's "model_shards" (checkpoint/sharded_save.h); any
//                            layout resumes it, and the commands read it as model.safetensors
//   model.epE.safetensors    dist.ep > 1: EP rank E's experts (its flat expert region), and
//   optim.epE.safetensors    their Adam moments
//   objective.safetensors    parameters the objective trains beside the model (distillation's
//                            feature projections), when it has any
//   tokenizer.json           copy of the run's tokenizer, so a checkpoint stands alone
//   meta.json                step, epoch, data position, world size, tokenizer hash,
//                            resolved config (YAML), optimizer name, step and state layout
//                            (how to reshard), fp16 loss scale, LoRA base path + sha256
//                            ("lora_base"), checksums (added by
//                            CheckpointStore)
// Tensors are written from whatever device they live on and read back onto the model's, so a
// checkpoint saved on a GPU resumes on a CPU and back. Dropout needs no device RNG state: its
// masks are seeded from (seed, step, micro-step) (model/dropout.h).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "checkpoint/checkpoint_store.h"
#include "checkpoint/sharded_reader.h"
#include "checkpoint/sharded_save.h"
#include "data/window_stream.h"
#include "model/build_model.h"
#include "model/gpt.h"
#include "optim/flat_params.h"
#include "optim/loss_scaler.h"
#include "optim/optimizer.h"

namespace lmtrain::train {

struct TrainingState {
  int64_t step = 0;  // completed optimizer steps
  data::DataPosition position;
  std::optional<LossScalerState> loss_scale;  // fp16 runs only
  // LoRA runs: {"path", "sha256"} of the frozen base (checkpoint/lora_checkpoint.h); null
  // otherwise.
  nlohmann::json lora_base;
  // Streaming runs (data.source = stream): {"positions": [one StreamPosition per rank, by rank],
  // "corpus": the inputs' fingerprint}; null otherwise.
  nlohmann::json stream;
};

struct CheckpointInputs {
  const std::string& config_yaml;  // the run's resolved config, recorded in meta.json
  model::GptImpl& model;
  const optim::Optimizer& optimizer;
  const TrainingState& state;
  int world_size;
  std::string tokenizer_json;  // file contents
  std::string tokenizer_hash;
  // The objective's own trained parameters (Objective::trained_module), or null.
  const torch::nn::Module* objective = nullptr;
  // ZeRO-3 over several ranks, dist.tp or dist.ep: save shards, no gather
  // (checkpoint/sharded_save.h); null else.
  const ShardedSave* shards = nullptr;
};

// Rank 0: writes the checkpoint. With a sharded optimizer, ranks 1..world_size-1 must have
// called write_optimizer_shard() for this step first (the caller synchronises). ended_epoch
// (N >= 1): this step ended epoch N, and the store links it as epoch_N_step_M.
std::string save_training_checkpoint(CheckpointStore& store, const CheckpointInputs& in,
                                     std::optional<double> val_loss, double train_loss,
                                     std::optional<int64_t> ended_epoch = std::nullopt);

// Ranks > 0 of a sharded optimizer: this rank's optim.rankN.safetensors, into the staging dir
// (with in.shards: the ranks 1..G-1 of the first shard group only).
void write_optimizer_shard(const std::string& run_dir, int64_t step, int rank,
                           const optim::Optimizer& optimizer);

// Refuses checkpoints whose model shape differs from `model`'s (naming every differing key), and
// a LoRA checkpoint whose adapters differ from model.lora.
void check_model_compatible(const LoadedCheckpoint& ckpt, const model::ModelOptions& model);

// data.seq_len of the run that saved the checkpoint: the unit of its data position.
int64_t checkpoint_seq_len(const LoadedCheckpoint& ckpt);
// The model the checkpoint's recorded config describes (vocab_size as recorded).
model::ModelOptions checkpoint_model_options(const LoadedCheckpoint& ckpt);

// Restores parameters (the model's, and the objective's when it trains any), optimizer state,
// RNG and returns the training state. A tensor-parallel run passes `localize`: it gets its
// slices of the whole tensors (parameters and moments) of a checkpoint saved in any layout.
TrainingState restore_training_checkpoint(const LoadedCheckpoint& ckpt, model::GptImpl& model,
                                          optim::Optimizer& optimizer,
                                          torch::nn::Module* objective = nullptr,
                                          const TensorLocalizer& localize = {});

// ZeRO-3's sharded set-up (parallel/sharded_init.h) resuming, all but the parameters: the
// optimizer state of the range this rank keeps, the RNG and the training state. The parameters
// are read by range into this rank's shard by train/init_from_shard.h's restore_training_shard,
// which calls this first (the moments are of what trains: a LoRA checkpoint's adapters', an
// objective's parameters' beside the model's).
// `experts`: under expert parallelism, this rank's experts (ep_localizer): a sharded
// checkpoint's moments are read through it, as restore_training_checkpoint reads them.
TrainingState restore_shard_optimizer_and_state(const LoadedCheckpoint& ckpt,
                                                optim::Optimizer& optimizer,
                                                const TensorLocalizer& experts = {});

// The parameters an objective trains (Objective::trained_module: distillation's projections, a
// temporal encoder) from the checkpoint's objective.safetensors, by name; UsageErrors name what
// is missing. The checkpoint must have been loaded with that file.
void load_objective_tensors(const LoadedCheckpoint& ckpt, torch::nn::Module& objective);

// Which of a model's tensors a file provides: all parameters and buffers; a LoRA base's (all but
// the adapters); or what a training checkpoint stores (trainable parameters and buffers).
enum class ModelTensors { kAll, kBase, kCheckpointed };

// Copies named tensors into the model's parameters; every tensor of `which` must be present with
// the right shape (errors name the tensor).
void load_model_tensors(model::GptImpl& model, const core::SafetensorsFile& file,
                        const std::string& origin, ModelTensors which = ModelTensors::kAll);
// The same from tensors read one at a time (sharded_reader.h's TensorByName): only one of them
// is held at once beside the model.
void load_model_tensors_from(model::GptImpl& model, const TensorByName& file,
                             const std::string& origin, ModelTensors which = ModelTensors::kAll);

// A tensor-parallel run's part of a checkpoint's model tensors, read by range whatever layout
// saved them (sharded_reader.h's slice files or an unsharded model.safetensors), into `model`.
// The checkpoint may have been loaded with tensors_by_range (no tensor file read). For a resume
// and for model.init_from alike.
void load_local_model_tensors(const LoadedCheckpoint& ckpt, model::GptImpl& model,
                              const TensorLocalizer& localize);

}  // namespace lmtrain::train
