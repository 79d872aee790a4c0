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
#include "train/trainer_parts.h"

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

  RunSaver saver(s, group, dp, fsdp.get(), store, tokenizer_json);
  auto save = [&](std::optional<double> val_loss, std::optional<int64_t> ended_epoch) {
    const std::string dir =
        saver.save(stepper.loss_scaler(), val_loss, result.last_loss, ended_epoch);
    if (!dir.empty()) result.last_checkpoint = dir;
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
