// ZeRO-3 checkpoints without a gather (dist.zero=3 over several ranks): each rank of the first
// shard group writes its own files, which together hold the whole training state,
//   model.rank<r>.safetensors  "params": flat parameter elements [r S, (r+1) S) (fp32 master);
//                              rank 0's also holds the model's buffers by name
//   optim.rank<r>.safetensors  "exp_avg", "exp_avg_sq": the same range of the Adam moments;
//                              rank 0's also the CPU RNG state
// and meta.json records the layout ("model_shards", format in checkpoint/sharded_reader.h).
// Ranks r > 0 write into the step's staging dir; after a barrier over the group, rank 0 moves
// them into its checkpoint dir, checksums them and publishes it (CheckpointStore::save): a rank
// that dies before the barrier leaves no new checkpoint, and the previous one stays `latest`.
// Under HSDP the other shard groups hold copies of the same shards and write nothing.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "checkpoint/checkpoint_store.h"
#include "model/gpt.h"
#include "optim/flat_params.h"

namespace lmtrain::train {

struct ShardedSave {
  const optim::FlatParams* flat = nullptr;  // keep_shard()ed: this rank's [r S, (r+1) S)
  int shard_ranks = 1;                      // G: the ranks one copy is sharded over
  int world_size = 1;                       // N
  int zero = 3;
  // Flat segments under this prefix are the objective's (objective.safetensors); the trainer
  // passes objective/'s kObjectivePrefix.
  std::string objective_prefix;
};

std::string model_shard_file(int rank);

// Ranks 1..G-1: this rank's parameter shard, flat elements [begin, begin + size), into the
// staging dir of `step` (CheckpointStore::staging_dir).
void write_model_shard(const std::string& run_dir, int64_t step, int rank,
                       const optim::FlatParams& flat, int64_t begin, int64_t size);

// Rank 0: the tensors of its model.rank0.safetensors (its shard and the model's buffers).
TensorList rank0_model_shard(const ShardedSave& save, const model::GptImpl& model);

// meta.json's "model_shards" for the layout `save` describes.
nlohmann::json model_shards_meta(const ShardedSave& save, const model::GptImpl& model);

}  // namespace lmtrain::train
