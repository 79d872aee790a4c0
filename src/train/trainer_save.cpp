// Saving a run's checkpoints (train/trainer_parts.h).
#include <algorithm>

#include "checkpoint/training_checkpoint.h"
#include "core/fault_injection.h"
#include "core/log.h"
#include "objective/objective.h"
#include "train/trainer_parts.h"

namespace lmtrain::train {
namespace {

// The layout of a checkpoint saved without a gather: ZeRO-3 over several ranks (the first
// shard group's ranks write), tensor parallelism (the TP ranks of the first data-parallel
// replica, or of its first shard group under ZeRO), or expert parallelism (the first EP group's
// ranks write their experts; the shared region as ZeRO-3's shards, or whole by rank 0). None
// otherwise: rank 0 saves the model.
std::optional<ShardedSave> run_sharded_save_of(const RunSetup& s, const optim::FlatParams& flat,
                                               const optim::Optimizer& optimizer,
                                               dist::Group& world, dist::Group& dp,
                                               const parallel::FullyShard* fsdp) {
  if (!fsdp && !s.ep.active() && !s.tp) return std::nullopt;
  ShardedSave out;
  out.flat = &flat;
  out.shard_ranks = fsdp ? s.shards.shard_group(dp).size() : 1;
  out.world_size = world.size();
  out.zero = s.options.optimizer.zero;
  out.objective_prefix = kObjectivePrefix;
  // Muon's state goes by name, each data-parallel rank holding its matrices' momentum.
  out.optim_by_name = optimizer.state_layout().value("kind", "") == "muon";
  out.ep = s.ep.ep;
  // The moments' shards cover what the parameters' do (under EP the shared region only).
  const int64_t own_moments = optimizer.shard_end() - optimizer.shard_begin();
  out.optim_ranks =
      out.optim_by_name
          ? (optimizer.sharded() ? dp.size() : 1)
          : static_cast<int>(std::max<int64_t>(1, shared_flat_numel(out) / own_moments));
  if (s.tp) {
    out.tp = s.tp->size();
    out.tp_splits = s.tp->checkpoint_splits();
  }
  return out;
}

}  // namespace

RunSaver::RunSaver(RunSetup& s, dist::Group& world, dist::Group& dp,
                   const parallel::FullyShard* fsdp, CheckpointStore& store,
                   std::string tokenizer_json)
    : s_(s),
      world_(world),
      dp_(dp),
      store_(store),
      tokenizer_json_(std::move(tokenizer_json)),
      shards_(run_sharded_save_of(s, *s.flat, *s.optimizer, world, dp, fsdp)) {}

std::string RunSaver::save(const LossScaler& scaler, std::optional<double> val_loss,
                           double train_loss, std::optional<int64_t> ended_epoch) {
  TrainingState& state = s_.state;
  const optim::Optimizer& optimizer = *s_.optimizer;
  const int rank = world_.rank();
  const std::string& run_dir = s_.options.run_dir;
  if (scaler.enabled()) state.loss_scale = scaler.state();
  if (s_.stream) state.stream = s_.stream->checkpoint_state(dp_);  // every rank's position
  if (shards_) {
    write_rank_shards(run_dir, state.step, rank, *shards_, optimizer);
    core::maybe_inject_save_fault(rank, state.step);
    // Rank 0 publishes only once every rank's files are written.
    world_.barrier();
  } else if (optimizer.sharded()) {
    // Each rank writes its own optimizer shard; rank 0 then moves them into the checkpoint.
    // HSDP (ZeRO-3 with expert parallelism): the first shard group's ranks, whose dp ranks are
    // their shards' indices; the other groups hold copies.
    const int shard_files = s_.shards.shard_group(dp_).size();
    if (dp_.rank() != 0 && dp_.rank() < shard_files) {
      write_optimizer_shard(run_dir, state.step, dp_.rank(), optimizer);
    }
    world_.barrier();
  }
  if (rank != 0) return "";
  CheckpointInputs in{s_.config_snapshot,
                      *s_.model,
                      optimizer,
                      state,
                      dp_.size(),
                      tokenizer_json_,
                      s_.tokenizer->hash(),
                      s_.objective->trained_module(),
                      shards_ ? &*shards_ : nullptr};
  const std::string dir = save_training_checkpoint(store_, in, val_loss, train_loss, ended_epoch);
  log::info("saved checkpoint " + dir);
  return dir;
}

}  // namespace lmtrain::train
