#include "train/trainer.h"

#include <chrono>
#include <cstring>
#include <filesystem>

#include "checkpoint/lora_checkpoint.h"
#include "checkpoint/run_dir_claim.h"
#include "checkpoint/training_checkpoint.h"
#include "core/error.h"
#include "core/fault_injection.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/stop_signal.h"
#include "core/threads.h"
#include "data/batch.h"
#include "data/bpe_tokenizer.h"
#include "data/prepared_data.h"
#include "data/token_split.h"
#include "data/window_stream.h"
#include "distill/distill_setup.h"
#include "distill/teacher.h"
#include "distill/teacher_cache.h"
#include "distributed/host_collectives.h"
#include "model/build_model.h"
#include "model/lora.h"
#include "objective/objective.h"
#include "observe/metrics_logger.h"
#include "optim/flat_params.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer_factory.h"
#include "parallel/expert_parallel.h"
#include "parallel/frozen_shard.h"
#include "parallel/fully_shard.h"
#include "parallel/replica_sync.h"
#include "parallel/tp_regions.h"
#include "report/run_report.h"
#include "train/batch_plan.h"
#include "train/cuda_graph_step.h"
#include "train/evaluator.h"
#include "train/run_setup.h"
#include "train/step_interval.h"
#include "train/stream_data.h"
#include "train/temporal_setup.h"
#include "train/token_window_data.h"
#include "train/train_step.h"

namespace lmtrain::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// A fresh run whose run.dir holds model.init_from (an import's or a merge's own directory) would
// write into the run it starts from, and --overwrite would move those weights aside before they
// are read: refused, naming both, on every rank alike (the config is the same everywhere).
void refuse_run_dir_holding_init_from(const std::string& init_from, const std::string& run_dir,
                                      bool resuming) {
  if (resuming || init_from.empty()) return;
  auto normal = [](const std::string& p) {
    std::string s = std::filesystem::weakly_canonical(std::filesystem::absolute(p)).string();
    while (s.size() > 1 && s.back() == '/') s.pop_back();
    return s;
  };
  const std::string run = normal(run_dir), src = normal(init_from);
  if (src != run && src.rfind(run + "/", 0) != 0) return;
  throw UsageError("run.dir = " + run_dir + " holds model.init_from = " + init_from +
                   ", the checkpoint this run starts from: train into another run.dir (the "
                   "config.yaml that `lmtrain import hf` and `lmtrain lora merge` write names " +
                   run + "-finetune)");
}

// The run's start in the log: the step workers, the gradient buckets of a multi-rank run, an
// fp16 run's loss scale and whether CUDA graphs are on (under auto, why not).
void log_loop_start(TrainStepper& stepper, const RunOptions& options, int workers,
                    const dist::Group& group, const core::Runtime& rt) {
  if (rt.loss_scaling()) {
    log::info(log::format("fp16 loss scale %.6g (doubles after %lld clean steps)",
                          stepper.loss_scaler().scale(), (long long)options.loss_scale_window));
  }
  log::info(
      log::format("step workers: %d (each micro-batch split into %d slice(s))", workers, workers));
  if (group.size() > 1 && stepper.grad_sync()) {
    log::info(log::format("gradient sync: %zu bucket(s) of <= %.3g MiB over %s, %d ranks",
                          stepper.grad_sync()->buckets().size(), options.bucket_mb,
                          group.backend().c_str(), group.size()));
  }
  log::info(describe(options.cuda_graphs));
}

// This rank's model state by kind: the trained parameters and their gradients (whole, or
// ZeRO-3's shards) and the optimizer's state.
void log_model_state(const RunSetup& s, int64_t params, int64_t grads) {
  const int64_t state = s.optimizer->state_bytes();
  log::info(log::format(
      "model state on this rank (trained_parameters: %lld): parameters %lld + gradients %lld "
      "+ optimizer %lld bytes; model_state_bytes_per_rank: %lld",
      (long long)s.flat->num_parameters(), (long long)params, (long long)grads, (long long)state,
      (long long)(params + grads + state)));
}

// Frozen parameters (a LoRA base) held by this rank: whole, or ZeRO-3's pieces of them.
void log_frozen_state(int64_t held, int64_t whole) {
  if (whole == 0) return;
  log::info(log::format(
      "frozen parameters on this rank: frozen_bytes_per_rank: %lld (frozen_bytes_whole: %lld)",
      (long long)held, (long long)whole));
}

// ZeRO-3 (dist.zero=3) over more than one rank: the parameters sharded, the hooks installed,
// and this rank's model state logged by kind. Null otherwise (one rank: ZeRO-2's path).
std::unique_ptr<parallel::FullyShard> make_fully_shard(RunSetup& s, dist::Group& world,
                                                       const core::Runtime& rt) {
  const auto& o = s.options.optimizer;
  dist::Group& shard_group = s.shards.shard_group(world);
  if (o.zero != 3 || shard_group.size() == 1) {
    const int64_t whole = s.flat->numel() * s.flat->options().dtype().itemsize();
    log_model_state(s, whole, whole);
    log_frozen_state(parallel::frozen_param_bytes(*s.model),
                     parallel::frozen_param_bytes(*s.model));
    return nullptr;
  }
  const auto wire = parallel::gather_dtype_for(rt.precision, s.tp != nullptr);
  // Under expert parallelism each rank's experts stay local and whole (parallel/moe_shard.h).
  auto fsdp = std::make_unique<parallel::FullyShard>(
      *s.model, *s.flat, shard_group, s.shards.replicas.get(), o.reshard_after_forward, wire,
      s.ep.active(), s.frozen_source);
  fsdp->set_reduce_dtype(rt.reduce_dtype);
  fsdp->install();
  const auto b = fsdp->bytes();
  log::info(log::format(
      "ZeRO-3: %zu units (root + %zu blocks) sharded over %d ranks%s, reshard_after_forward=%s, "
      "blocks' linear weights gathered in %s",
      fsdp->units().size(), fsdp->units().size() - 1, shard_group.size(),
      s.shards.replicas
          ? log::format(", replicated over %d groups (HSDP)", s.shards.replicas->size()).c_str()
          : "",
      o.reshard_after_forward ? "true" : "false", wire ? "bf16" : "fp32"));
  log_model_state(s, b.param_shard, b.grad_shard);
  log_frozen_state(b.frozen_shard, b.frozen_whole);
  return fsdp;
}

void log_shard_peaks(const parallel::FullyShard& fsdp) {
  const auto b = fsdp.bytes();
  log::info(log::format(
      "ZeRO-3 peaks: zero3_gathered_peak_bytes: %lld (blocks; largest block unit %lld bytes; "
      "the root unit's %lld bytes held during each step), unit gradient buffers %lld bytes",
      (long long)b.gathered_peak, (long long)b.largest_block, (long long)b.root_gathered,
      (long long)b.grad_buffers_peak));
}

// While alive, a ZeRO-3 model runs forward only, block by block (evaluation): it is never whole
// on any rank.
class ShardedForward {
 public:
  explicit ShardedForward(parallel::FullyShard* fsdp) : fsdp_(fsdp) {
    if (fsdp_) fsdp_->begin_forward_only();
  }
  ~ShardedForward() {
    if (fsdp_) fsdp_->end_forward_only();
  }
  ShardedForward(const ShardedForward&) = delete;
  ShardedForward& operator=(const ShardedForward&) = delete;

 private:
  parallel::FullyShard* fsdp_;
};

// The layout of a checkpoint saved without a gather: ZeRO-3 over several ranks (the first
// shard group's ranks write), tensor parallelism (the TP ranks of the first data-parallel
// replica, or of its first shard group under ZeRO), or expert parallelism (the first EP group's
// ranks write their experts; the shared region as ZeRO-3's shards, or whole by rank 0). None
// otherwise: rank 0 saves the model.
std::optional<ShardedSave> sharded_save_of(const RunSetup& s, const optim::FlatParams& flat,
                                           const optim::Optimizer& optimizer, dist::Group& world,
                                           dist::Group& dp, const parallel::FullyShard* fsdp) {
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

// Moves the data position past the step just taken; true when that step ended an epoch. A
// stream's position is the loader's, per rank (state.stream at a save): there is no global window
// cursor (meta.json's data_cursor stays 0). Prepared windows: the remainder of an epoch's order
// that no longer fills a step is dropped.
bool advance_data_position(TrainingState& state, const BatchPlan& plan, const TrainingData& data,
                           StreamData* stream) {
  if (stream) {
    state.position.epoch = stream->position().epoch;  // this rank's (the logs' epoch)
    return false;
  }
  state.position.cursor += plan.global_windows;
  if (state.position.cursor + plan.global_windows <= data.train_samples()) return false;
  ++state.position.epoch;
  state.position.cursor = 0;
  return true;
}

// Block index of each MoE layer, for the metrics.
std::vector<int64_t> moe_layer_indices(const model::GptConfig& mcfg) {
  std::vector<int64_t> out;
  for (int64_t l = 0; l < mcfg.n_layer; ++l) {
    if (mcfg.moe.is_moe_layer(l)) out.push_back(l);
  }
  return out;
}

// One log line's record (metrics.jsonl, TensorBoard, the progress line) of the step just taken.
StepMetrics step_metrics(const TrainingState& state, double loss, const StepResult& r,
                         const std::vector<std::string>& metric_names, double lr,
                         TrainStepper& stepper, const core::Runtime& rt, double train_seconds,
                         const std::vector<int64_t>& moe_layers) {
  StepMetrics m;
  m.step = state.step;
  m.epoch = state.position.epoch;
  m.loss = loss;
  const auto values = r.metric_values();
  for (size_t i = 0; i < metric_names.size(); ++i) m.terms.emplace_back(metric_names[i], values[i]);
  m.lr = lr;
  m.grad_norm = r.grad_norm_value();
  m.loss_scale = stepper.loss_scaler().enabled() ? stepper.loss_scaler().scale() : 0;
  m.skipped_steps = stepper.loss_scaler().state().skipped_steps;
  m.peak_mem_bytes = core::peak_device_memory(rt.device);
  m.elapsed_s = train_seconds;
  m.moe = summarize_moe(r.moe, moe_layers);
  return m;
}

// The run's last lines: a run cut short by a signal says so (not "done": the exit code, 128 +
// signal, and this line tell a scheduler), a stream run how long the steps waited for tokens.
void log_loop_end(const TrainResult& result, const TrainingState& state, int64_t max_steps,
                  const StreamData* stream, int64_t queue_batches, double train_seconds) {
  if (result.stop_signal) {
    log::warn(log::format(
        "stopped by signal %d (%s) at step %lld of %lld; checkpoint %s saved: continue with "
        "--resume=auto",
        result.stop_signal, ::strsignal(result.stop_signal), (long long)state.step,
        (long long)max_steps,
        result.last_checkpoint.empty() ? "(on rank 0)" : result.last_checkpoint.c_str()));
    return;
  }
  if (stream) {
    log::info(log::format(
        "stream loader: the steps waited %.2f s for tokens in %s of training; the queue held up "
        "to %zu of %lld micro-batches",
        stream->wait_seconds(), format_duration(train_seconds).c_str(), stream->max_queued(),
        (long long)queue_batches));
  }
  log::info(log::format(
      "done: %lld steps, last loss %.4f%s, %s of training", (long long)state.step, result.last_loss,
      result.last_val_loss ? log::format(", val loss %.4f", *result.last_val_loss).c_str() : "",
      format_duration(train_seconds).c_str()));
}

}  // namespace

StartedRun start_run(const RunOptions& options, dist::Group& group, const core::Runtime& rt,
                     int local_world_size, bool overwrite) {
  const int rank = group.rank();
  const std::string& run_dir = options.run_dir;
  core::ensure_dir(run_dir);
  const bool resuming = options.resume.any();
  refuse_run_dir_holding_init_from(options.init_from, run_dir, resuming);
  StartedRun run;
  // Held (by rank 0) until the run ends: no other job writes into this run dir meanwhile.
  run.lock = claim_run_dir(run_dir, options.resume, overwrite, group);
  run.log_path =
      run_dir + (rank == 0 ? "/train.log" : "/train.rank" + std::to_string(rank) + ".log");
  log::set_file(run.log_path);
  run.threads = core::configure_threads(options.threads, local_world_size);
  log::info(log::format("lmtrain train: rank %d of %d, %d intra-op thread(s), run dir %s", rank,
                        group.size(), run.threads, run_dir.c_str()));
  log::info(rt.describe());
  return run;
}

TrainResult run_training(const RunOptions& options, const SetupOptions& setup_options,
                         ConfigSnapshot& snapshot, dist::Group& group, const core::Runtime& rt,
                         const StartedRun& run) {
  const int rank = group.rank();
  const bool is_main = rank == 0;
  log::set_file(run.log_path);
  // dist.tp > 1: a 2-D mesh, TP inner, data parallelism outer (tensor_parallel_plan.h). `dp` is
  // what the data, the gradient sync, ZeRO and evaluation run over; the world still agrees on
  // stopping, and its rank 0 writes the run's files.
  parallel::TpGroups tp_groups;
  if (options.tp > 1) tp_groups = parallel::make_tp_groups(group, options.tp);
  dist::Group& dp = options.tp > 1 ? *tp_groups.dp : group;
  auto setup = set_up_run(options, setup_options, snapshot, dp, rt, tp_groups.tp.get());
  RunSetup& s = *setup;
  if (!s.complete_checkpoint.empty()) {
    TrainResult done;
    done.steps_done = s.state.step;
    done.last_checkpoint = s.complete_checkpoint;
    done.already_complete = true;
    group.barrier();  // rank 0 hosts the TCPStore: nobody leaves while another rank needs it
    return done;
  }
  // The loop's names for the parts of the run.
  const std::string& run_dir = options.run_dir;
  const bool temporal = s.setup.temporal;
  TrainingData* data = s.data.get();
  StreamData* stream = s.stream;
  const data::BpeTokenizer& tokenizer = *s.tokenizer;
  const model::GptConfig& mcfg = s.setup.model.shape;
  const BatchPlan& plan = s.options.batch;
  const int64_t max_steps = s.max_steps;
  const LoopOptions& loop = options.loop;
  const int64_t stop_at = loop.stop_at_step;
  const uint64_t seed = options.seed;
  ExpertParallel& ep = s.ep;
  model::Gpt& model = s.model;
  const auto& dispatcher = s.dispatcher;
  const auto& objective = s.objective;
  optim::FlatParams& flat = *s.flat;
  optim::Optimizer& optimizer = *s.optimizer;
  TrainingState& state = s.state;
  if (is_main) core::write_file_atomic(run_dir + "/config.yaml", s.config_snapshot);
  CheckpointStore store(run_dir, loop.keep_last);
  MetricsLogger metrics(run_dir, is_main, loop.tensorboard, max_steps);
  const std::string tokenizer_json = core::read_file(s.tokenizer_path);

  TrainResult result;
  const int64_t log_every = loop.log_every;
  const int64_t eval_every = loop.eval_every;
  const int64_t eval_batches = loop.eval_batches;
  const int64_t ckpt_every = loop.checkpoint_every;
  const bool ckpt_every_epoch = loop.checkpoint_every_epoch;
  const double grad_clip = options.grad_clip;
  const double timeout_s = options.collective_timeout_s;

  core::install_stop_handlers();
  model->train();
  double train_seconds = 0;
  StepInterval interval;  // the steps since the last log line
  const int64_t start_step = state.step;
  // Split-batch workers would run the TP collectives from several threads: one under TP.
  const int workers = s.tp ? 1 : resolve_workers(options.workers, run.threads, plan.micro_batch);
  sync_replicas(dp, flat, optimizer, state, ep.active() ? ep.replica_group.get() : nullptr);
  // ZeRO-3 over several ranks: from here on the parameters live as shards (fully_shard.h).
  std::unique_ptr<parallel::FullyShard> fsdp = make_fully_shard(s, dp, rt);
  TrainStepper stepper(*model, flat, optimizer, dp, rt, workers, seed, options.bucket_bytes(),
                       LossScaler(rt.loss_scaling(), options.loss_scale, options.loss_scale_window),
                       &ep, fsdp.get());
  if (s.tp) stepper.use_tensor_parallel(*s.tp, *tp_groups.tp, s.shards.shard_group(dp));
  stepper.set_objective(objective);
  // Only a temporal row's answer tokens, or a conversation's assistant tokens, are targets.
  stepper.set_masked_targets(temporal || s.setup.data.format == DataFormat::kChat);
  std::unique_ptr<CudaGraphStep> graphed;
  if (options.cuda_graphs.enabled) {
    graphed = std::make_unique<CudaGraphStep>(stepper, optimizer, options.cuda_graphs.warmup);
  }
  const auto metric_names = stepper.objective().metric_names();
  // A resumed fp16 run continues with its saved scale; anything else starts at
  // train.loss_scale.
  if (state.loss_scale) stepper.loss_scaler().restore(*state.loss_scale);
  log_loop_start(stepper, options, workers, dp, rt);

  // ZeRO-3 over several ranks, tensor and expert parallelism save shards, never the gathered model
  // (checkpoint/sharded_save.h): each rank holding a distinct part writes it.
  std::optional<ShardedSave> shards = sharded_save_of(s, flat, optimizer, group, dp, fsdp.get());
  auto save = [&](std::optional<double> val_loss, std::optional<int64_t> ended_epoch) {
    if (stepper.loss_scaler().enabled()) state.loss_scale = stepper.loss_scaler().state();
    if (stream) state.stream = stream->checkpoint_state(dp);  // every rank's position
    if (shards) {
      write_rank_shards(run_dir, state.step, rank, *shards, optimizer);
      core::maybe_inject_save_fault(rank, state.step);
      // Rank 0 publishes only once every rank's files are written.
      group.barrier();
    } else if (optimizer.sharded()) {
      // Each rank writes its own optimizer shard; rank 0 then moves them into the checkpoint.
      // HSDP (ZeRO-3 with expert parallelism): the first shard group's ranks, whose dp ranks are
      // their shards' indices; the other groups hold copies.
      const int shard_files = s.shards.shard_group(dp).size();
      if (dp.rank() != 0 && dp.rank() < shard_files) {
        write_optimizer_shard(run_dir, state.step, dp.rank(), optimizer);
      }
      group.barrier();
    }
    if (!is_main) return;
    CheckpointInputs in{s.config_snapshot,
                        *model,
                        optimizer,
                        state,
                        dp.size(),
                        tokenizer_json,
                        tokenizer.hash(),
                        objective->trained_module(),
                        shards ? &*shards : nullptr};
    result.last_checkpoint =
        save_training_checkpoint(store, in, val_loss, result.last_loss, ended_epoch);
    log::info("saved checkpoint " + result.last_checkpoint);
  };

  const std::vector<int64_t> moe_layers = moe_layer_indices(mcfg);
  if (s.tp) take_tp_comm_seconds();  // set-up's collectives are not a step's
  while (state.step < max_steps) {
    const auto t0 = Clock::now();
    const double lr = s.schedule.at(state.step);
    auto next_batch = [&](int64_t m) {
      std::vector<int64_t> positions;
      for (int64_t slot : plan.slots(dp.rank(), m)) {
        positions.push_back(state.position.cursor + slot);
      }
      return data->train_batch(state.position.epoch, positions, rt.device);
    };
    auto r = graphed ? graphed->step(plan.accum_steps, next_batch, lr, grad_clip)
                     : stepper.step(plan.accum_steps, next_batch, lr, grad_clip);
    ++state.step;
    core::maybe_inject_fault(rank, state.step);
    const bool epoch_ended = advance_data_position(state, plan, *data, stream);
    // checkpoint.every_epoch: the step that ends an epoch is evaluated (so that best can be
    // decided) and saved, linked as epoch_N_step_M with N = the epoch just finished (from 1).
    const bool epoch_save = ckpt_every_epoch && epoch_ended;
    const bool last = state.step == max_steps;
    // Every rank must stop at the same step, whichever of them got the signal. A host-side
    // exchange (under NCCL it goes through the group's Gloo companion): it never waits for the GPU.
    const int stop_signal = dist::max_over_ranks(group, core::stop_signal());
    const bool stopping = stop_signal != 0 || (stop_at > 0 && state.step >= stop_at);
    const bool eval_now =
        ((eval_every > 0 && state.step % eval_every == 0) || last || epoch_save) &&
        data->val_samples() > 0;
    const bool save_now =
        (ckpt_every > 0 && state.step % ckpt_every == 0) || last || stopping || epoch_save;
    const bool log_now = state.step % log_every == 0 || state.step == start_step + 1 || last;
    // The loss is read from the device only here (on a GPU each read waits for the step), and
    // always before a checkpoint, so a diverged model is never saved.
    if (log_now || save_now) {
      if (graphed && group.size() > 1) graphed->wait_for_steps(timeout_s, rank);
      result.last_loss = r.loss_value();
      if (!std::isfinite(result.last_loss)) {
        throw Error(log::format("loss became %f by step %lld: lower optim.lr or check the data",
                                result.last_loss, (long long)state.step));
      }
    }
    // On a GPU the steps in between only queued work; the read above waited for all of it, so
    // the interval's summed time is its wall time.
    const double dt = seconds_since(t0);
    train_seconds += dt;
    // Under TP every collective of the plan blocks the step: all of it is unhidden.
    interval.add(dt, plan.tokens_per_step(), plan.global_windows,
                 r.comm_wait_s + (s.tp ? take_tp_comm_seconds() : 0.0),
                 dispatcher ? dispatcher->take_comm_seconds() : 0.0);

    if (log_now) {
      StepMetrics m = step_metrics(state, result.last_loss, r, metric_names, lr, stepper, rt,
                                   train_seconds, moe_layers);
      // samples/s for a temporal run (its rows are samples), the loader's wait for a stream
      interval.report(m, temporal, group.size() > 1, dispatcher != nullptr,
                      stream ? std::optional<double>(stream->wait_seconds()) : std::nullopt);
      metrics.log_step(m);
    }
    std::optional<double> val_loss;
    if (eval_now) {
      ShardedForward blockwise(fsdp.get());
      val_loss = evaluate(*model, *s.val_objective, *data, plan.micro_batch, eval_batches, dp, rt);
      if (dispatcher) dispatcher->take_comm_seconds();  // eval exchanges are not step time
      metrics.log_eval(state.step, *val_loss);
      if (is_main && loop.report) report::refresh_run_report(run_dir);  // RUN_DIR/report.html
      result.last_val_loss = val_loss;
    }
    if (save_now) {
      save(val_loss, epoch_save ? std::optional<int64_t>(state.position.epoch) : std::nullopt);
    }
    if (stopping && !last) {
      result.stopped_early = true;
      result.stop_signal = stop_signal;
      log::info(stop_signal
                    ? log::format("stopping on signal %d at step %lld", stop_signal,
                                  (long long)state.step)
                    : log::format("stopping at train.stop_at_step = %lld", (long long)stop_at));
      break;
    }
  }
  result.steps_done = state.step;
  if (fsdp) log_shard_peaks(*fsdp);
  // Rank 0 hosts the TCPStore: nobody leaves while another rank may still need it.
  group.barrier();
  log_loop_end(result, state, max_steps, stream, s.setup.data.stream.queue_batches, train_seconds);
  return result;
}

}  // namespace lmtrain::train
