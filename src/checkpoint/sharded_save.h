// Checkpoints without a gather: ZeRO-3 over several ranks, tensor parallelism (dist.tp) and
// expert parallelism (dist.ep).
// The ranks that hold a distinct part of the training state write their own files, which
// together hold all of it,
//   model.rank<r>.safetensors  "params": flat parameter elements [d S, (d+1) S) of this rank's
//                              flat layout (fp32 master); rank 0's also holds the model's
//                              buffers by name
//   optim.rank<r>.safetensors  "exp_avg", "exp_avg_sq": flat elements [d So, (d+1) So) of the
//                              Adam moments (So: the optimizer's shard, or its whole flat);
//                              rank 0's also the CPU RNG state. Muon (optim_by_name): its state
//                              by name in TP rank t's local shapes instead ("momentum.<matrix>"
//                              on the matrix's owner, "exp_avg.<p>", "exp_avg_sq.<p>" of its
//                              AdamW group on d = 0), one file per data-parallel rank d
// where world rank r = d * tp + t: t its tensor-parallel rank (0 without TP), d its rank within
// the group its parameters (S) or moments (So) are sharded over. Under TP each TP rank's flat
// layout holds its own slices of the split parameters (parallel/tensor_parallel_plan.h): the
// same segments and offsets on every TP rank, so one flat_numel describes them all.
// Under expert parallelism (dist.ep = E > 1) the flat layout ends in the expert region
// [B, F) (B = expert_begin, optim/flat_params.h) that holds each EP rank's own experts: the same
// segments and offsets on every EP rank, different values, as TP's per-rank layouts are. The
// shards above then cover the shared region [0, B) only (S = B / G, So = B / optimizer ranks),
// and EP rank e = world rank e (the first EP group; the other groups' ranks are replicas of
// them) writes its experts, with no gather on rank 0:
//   model.ep<e>.safetensors    "params": flat [B, F) of EP rank e's layout (its expert stacks,
//                              experts [e n/E, (e+1) n/E) of each layer's n)
//   optim.ep<e>.safetensors    "exp_avg", "exp_avg_sq": their Adam moments, flat [B, F)
// meta.json records the layout ("model_shards", format in checkpoint/sharded_reader.h): an
// expert stack is a tensor of the whole shape (n, ...) in "slices" along dim 0, one per EP rank.
// Ranks r > 0 write into the step's staging dir; after a barrier over the world, rank 0 moves
// them into its checkpoint dir, checksums them and publishes it (CheckpointStore::save): a rank
// that dies before the barrier leaves no new checkpoint, and the previous one stays `latest`.
// Replicas (data-parallel copies, HSDP's other shard groups) hold copies and write nothing.
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint_store.h"
#include "model/gpt.h"
#include "optim/flat_params.h"
#include "optim/optimizer.h"

namespace lmtrain::train {

// A parameter split over the TP group: its whole shape, the dim it is split along, and per TP
// rank the [begin, end) ranges of that dim it holds, concatenated in order into its local tensor.
struct TpSplit {
  std::vector<int64_t> whole_shape;
  int64_t dim = 0;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> ranges_by_rank;
};

struct ShardedSave {
  const optim::FlatParams* flat = nullptr;  // ZeRO-3: keep_shard()ed, this rank's [d S, (d+1) S)
  int shard_ranks = 1;                      // ranks the parameters are sharded over (1: none)
  int world_size = 1;                       // N
  int zero = 3;
  // Flat segments under this prefix are the objective's (objective.safetensors); the trainer
  // passes objective/'s kObjectivePrefix.
  std::string objective_prefix;
  int tp = 1;           // dist.tp: TP ranks, each with its own flat layout of slices
  int optim_ranks = 1;  // ranks the moments are sharded over (1: a replicated optimizer)
  // The optimizer's state goes by name (Muon, whose per-matrix momentum has no flat layout):
  // each of the optim_ranks data-parallel ranks writes its state_tensors(), in its TP rank's
  // local shapes; the meta's "slices" of each parameter say how to make them whole again.
  bool optim_by_name = false;
  std::map<std::string, TpSplit> tp_splits;  // by parameter name; absent: whole on every TP rank
  // dist.ep: EP ranks 0..ep-1 each write their expert region (model.ep<e>, optim.ep<e>); the
  // shards above then cover the shared region [0, flat->expert_begin()) only.
  int ep = 1;
};

// Elements of the flat layout the shards (model.rank<r>, optim.rank<r>) cover: all of it, or
// under expert parallelism the shared region.
int64_t shared_flat_numel(const ShardedSave& save);

std::string model_shard_file(int rank);
std::string optim_shard_file(int rank);
std::string model_expert_file(int ep_rank);
std::string optim_expert_file(int ep_rank);

// EP rank `ep_rank`'s expert files' tensors: its expert region of the parameters ("params"), and
// of the Adam moments from Optimizer::expert_state ("exp_avg", "exp_avg_sq"), each (F - B,).
TensorList expert_model_tensors(const ShardedSave& save);
TensorList expert_optim_tensors(const ShardedSave& save, const optim::Optimizer& optimizer);

// Writes world rank `rank`'s files (the ones it holds a distinct part for, if any) into the
// staging dir of `step` (CheckpointStore::staging_dir). Not rank 0: its files go through
// save_training_checkpoint.
void write_rank_shards(const std::string& run_dir, int64_t step, int rank, const ShardedSave& save,
                       const optim::Optimizer& optimizer);

// The files of world ranks other than 0 that rank 0 moves into the checkpoint (their shards and
// the expert files of EP ranks 1..ep-1).
std::vector<std::string> other_rank_shard_files(const ShardedSave& save);

// Rank 0: the tensors of its model.rank0.safetensors (its shard and the model's buffers).
TensorList rank0_model_shard(const ShardedSave& save, const model::GptImpl& model);
// This rank's optimizer file: its Adam moments as flat "exp_avg" / "exp_avg_sq" over
// [d So, (d+1) So), or with optim_by_name its state by name.
TensorList optim_shard_tensors(const ShardedSave& save, const optim::Optimizer& optimizer);

// meta.json's "model_shards" for the layout `save` describes.
nlohmann::json model_shards_meta(const ShardedSave& save, const model::GptImpl& model);

}  // namespace lmtrain::train
