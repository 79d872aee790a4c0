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
#include "observe/metrics_logger.h"
#include "optim/flat_params.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer_factory.h"
#include "parallel/expert_parallel.h"
#include "parallel/replica_sync.h"
#include "report/run_report.h"
#include "train/batch_plan.h"
#include "train/cuda_graph_step.h"
#include "train/evaluator.h"
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

// A checkpoint a run starts from must hold this config's model and have been trained on
// data.dir's tokenizer (when it records one, or always with hash_required).
void check_start_checkpoint(const LoadedCheckpoint& ckpt, const core::Config& cfg,
                            const std::string& tokenizer_hash, const std::string& data_dir,
                            bool hash_required) {
  check_model_compatible(ckpt, cfg);
  const std::string saved = ckpt.meta.value("tokenizer_hash", "");
  if ((hash_required || !saved.empty()) && saved != tokenizer_hash) {
    throw UsageError("checkpoint " + ckpt.dir + " was trained with a different tokenizer (" +
                     (saved.empty() ? std::string("none recorded") : saved) +
                     ") than data.dir = " + data_dir + " (" + tokenizer_hash + ")");
  }
}

int64_t resolve_max_steps(const core::Config& cfg, int64_t steps_per_epoch, bool streamed) {
  int64_t max_steps = cfg.get_int("train.max_steps");
  const int64_t epochs = cfg.get_int("train.epochs");
  if (streamed && (max_steps == 0 || epochs != 0)) {
    // Each rank reads units of its own, so the ranks' epochs end at different steps.
    throw UsageError(log::format(
        "data.source = stream trains for train.max_steps steps (it is %lld) and has no "
        "train.epochs (it is %lld): a stream's length is not known before it is read, and each "
        "rank's epoch ends at another step",
        (long long)max_steps, (long long)epochs));
  }
  if (max_steps == 0 && epochs == 0) {
    throw UsageError("set 'train.max_steps' or 'train.epochs' (both are 0)");
  }
  if (max_steps == 0) max_steps = epochs * steps_per_epoch;
  return max_steps;
}

// What a streaming run cannot be combined with, named (every rank alike).
void check_stream_config(const core::Config& cfg) {
  for (const char* key : {"model.temporal.enabled", "distill.enabled", "checkpoint.every_epoch"}) {
    if (cfg.get_bool(key)) {
      throw UsageError(std::string("data.source = stream and ") + key + " = true: " +
                       (std::string(key) == "checkpoint.every_epoch"
                            ? "each rank's epoch of a stream ends at another step (use "
                              "checkpoint.every)"
                            : "that run reads prepared windows (data.source = prepared)"));
    }
  }
}

// A checkpoint resumed by a run of the other data source, another world size, or other input
// files would go on from a position that does not exist: refused, naming what differs.
void check_stream_resume(const LoadedCheckpoint& ckpt, const TrainingState& state,
                         const StreamData* stream, int world) {
  if (!stream) {
    if (!state.stream.is_null()) {
      throw UsageError("checkpoint " + ckpt.dir +
                       " was trained with data.source = stream: resume it with "
                       "--data.source=stream and its data.stream.inputs, or start a new run "
                       "from its weights with --model.init_from=" +
                       ckpt.dir);
    }
    return;
  }
  if (state.stream.is_null()) {
    throw UsageError("checkpoint " + ckpt.dir +
                     " was trained on prepared windows (data.source = prepared): a stream "
                     "cannot go on from its data position; start a new run from its weights "
                     "with --model.init_from=" +
                     ckpt.dir);
  }
  const auto& positions = state.stream.at("positions");
  if (static_cast<int>(positions.size()) != world) {
    throw UsageError(log::format(
        "checkpoint %s was saved by a streaming run of %zu rank(s); this run has %d: each "
        "rank's stream position covers the units of that world size only, so a stream resumes "
        "at the world size it was saved at (or start a new run from its weights with "
        "--model.init_from=%s)",
        ckpt.dir.c_str(), positions.size(), world, ckpt.dir.c_str()));
  }
  if (state.stream.at("corpus").get<std::string>() != stream->corpus_fingerprint()) {
    throw UsageError("checkpoint " + ckpt.dir +
                     " was streamed from other input files (their paths or sizes differ from "
                     "data.stream.inputs now): its positions would point into other text; "
                     "resume with the same files, or start a new run with --model.init_from=" +
                     ckpt.dir);
  }
}

std::vector<int64_t> position_values(const data::StreamPosition& p) {
  return {p.epoch, p.unit, p.document, p.token, p.rank, p.world};
}

// A fresh run whose run.dir holds model.init_from (an import's or a merge's own directory) would
// write into the run it starts from, and --overwrite would move those weights aside before they
// are read: refused, naming both, on every rank alike (the config is the same everywhere).
void refuse_run_dir_holding_init_from(const core::Config& cfg, const std::string& run_dir,
                                      bool resuming) {
  const std::string init_from = cfg.get_string("model.init_from");
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

}  // namespace

StartedRun start_run(const core::Config& cfg, dist::Group& group, const core::Runtime& rt,
                     int local_world_size, bool overwrite) {
  const int rank = group.rank();
  if (cfg.get_bool("train.cuda_graphs")) check_cuda_graphs_config(cfg, rt, group.size());
  if (cfg.get_bool("model.temporal.enabled") && cfg.get_bool("distill.enabled")) {
    throw UsageError(
        "model.temporal.enabled and distill.enabled: a temporal run trains an encoder for a "
        "frozen LM, there is no student to distil into (turn one of them off)");
  }
  const std::string run_dir = cfg.get_string("run.dir");
  core::ensure_dir(run_dir);
  const std::string resume = cfg.get_string("checkpoint.resume");
  refuse_run_dir_holding_init_from(cfg, run_dir, !resume.empty() && resume != "none");
  StartedRun run;
  // Held (by rank 0) until the run ends: no other job writes into this run dir meanwhile.
  run.lock = claim_run_dir(run_dir, !resume.empty() && resume != "none", overwrite, group);
  run.log_path =
      run_dir + (rank == 0 ? "/train.log" : "/train.rank" + std::to_string(rank) + ".log");
  log::set_file(run.log_path);
  run.threads =
      core::configure_threads(static_cast<int>(cfg.get_int("train.threads")), local_world_size);
  log::info(log::format("lmtrain train: rank %d of %d, %d intra-op thread(s), run dir %s", rank,
                        group.size(), run.threads, run_dir.c_str()));
  log::info(rt.describe());
  return run;
}

TrainResult run_training(core::Config cfg, dist::Group& group, const core::Runtime& rt,
                         const StartedRun& run) {
  const int rank = group.rank();
  const bool is_main = rank == 0;
  const bool cuda_graphs = cfg.get_bool("train.cuda_graphs");
  const std::string run_dir = cfg.get_string("run.dir");
  const std::string resume = cfg.get_string("checkpoint.resume");
  log::set_file(run.log_path);

  // ---- data: token windows of data.dir, or (model.temporal.enabled) time-series QA rows in the
  // frozen LM's tokenizer, whose shape the run adopts
  const bool temporal = cfg.get_bool("model.temporal.enabled");
  const std::string data_dir =
      temporal ? cfg.get_string("data.temporal.dir") : cfg.get_string("data.dir");
  std::optional<LoadedCheckpoint> temporal_lm;
  std::string tok_path;
  if (temporal) {
    temporal_lm = temporal_lm_checkpoint(cfg);
    adopt_lm_shape(cfg, *temporal_lm);
    tok_path = temporal_lm->dir + "/tokenizer.json";
  }
  const auto seed = static_cast<uint64_t>(cfg.get_int("train.seed"));
  const bool streaming = cfg.get_string("data.source") == "stream";
  if (streaming) check_stream_config(cfg);
  std::unique_ptr<TrainingData> data;
  TokenWindowData* windows = nullptr;  // the LM data, when this is not a temporal run
  StreamData* stream = nullptr;        // data.source = stream
  const data::BpeTokenizer* tokenizer_ptr = nullptr;
  if (streaming) {
    auto stream_data = std::make_unique<StreamData>(cfg, rank, group.size());
    stream = stream_data.get();
    tok_path = stream_data->tokenizer_path();
    tokenizer_ptr = &stream_data->tokenizer();
    data = std::move(stream_data);
  } else if (temporal) {
    auto tok = data::BpeTokenizer::load_hf(tok_path);
    // model.n_embd is the LM's (adopt_lm_shape above).
    auto temporal_data = make_temporal_data(cfg, std::move(tok), cfg.get_int("model.n_embd"));
    tokenizer_ptr = &temporal_data->tokenizer();
    data = std::move(temporal_data);
  } else {
    auto token_data = std::make_unique<TokenWindowData>(data_dir, cfg.get_int("data.seq_len"), seed,
                                                        cfg.get_bool("data.shuffle"));
    windows = token_data.get();
    tok_path = token_data->tokenizer_path();
    tokenizer_ptr = &token_data->tokenizer();
    data = std::move(token_data);
  }
  const data::BpeTokenizer& tokenizer = *tokenizer_ptr;

  const auto mcfg =
      model::GptConfig::from_config(cfg, static_cast<int64_t>(tokenizer.vocab_size()));
  cfg.set("model.vocab_size", std::to_string(mcfg.vocab_size), "tokenizer");
  const auto plan = BatchPlan::from_config(cfg, group.size());
  const int64_t steps_per_epoch = data->train_samples() / plan.global_windows;
  if (steps_per_epoch == 0 && !streaming) {
    throw UsageError(log::format(
        "the training split has %lld %s of %lld tokens, fewer than one global batch "
        "(%lld rows): lower train.total_batch_size / train.micro_batch_size or data.seq_len",
        (long long)data->train_samples(), data->sample_name().c_str(), (long long)plan.seq_len,
        (long long)plan.global_windows));
  }
  const int64_t max_steps = resolve_max_steps(cfg, steps_per_epoch, streaming);
  const int64_t stop_at = cfg.get_int("train.stop_at_step");

  // ---- distillation: the teacher's logits from a cache, or the teacher's checkpoint (one to
  // train first was trained by the caller, before this run)
  const bool distill = cfg.get_bool("distill.enabled");
  if (!distill && !cfg.get_string("distill.cache").empty()) {
    log::warn("distill.cache = " + cfg.get_string("distill.cache") +
              " is ignored: distill.enabled is false (add --distill.enabled=true to distill from "
              "it)");
  }
  if (distill && !cfg.get_string("distill.cache").empty()) {
    windows->set_teacher_cache(open_teacher_cache(
        cfg, windows->train_shard(), windows->train_stream(), tokenizer.hash(), mcfg.vocab_size));
  } else if (distill) {
    resolve_teacher(cfg);
  }

  // ---- model and optimizer
  const auto ep = make_expert_parallel(group, cfg.get_int("dist.ep"), mcfg.moe.num_experts);
  const auto lora = model::LoraOptions::from_config(cfg);
  if (lora.enabled() && cfg.get_string("model.init_from").empty()) {
    throw UsageError(
        "config key 'lora.rank' > 0 fine-tunes a frozen base: set model.init_from to an lmtrain "
        "checkpoint or an `lmtrain import hf` directory");
  }
  torch::manual_seed(seed);
  // A temporal run's LM comes whole from model.init_from: nothing to initialise but LoRA
  // adapters (its second stage).
  auto model = model::build_model(
      cfg, rt, {/*init=*/!temporal || lora.enabled(), mcfg.vocab_size, ep.placement});
  TrainingState state;
  if (temporal) {
    // Before the encoder: its projector starts at the scale of the LM's token embeddings.
    state.lora_base = load_init_weights(*model, *temporal_lm);
    log::info("frozen LM from " + temporal_lm->dir);
  }
  std::shared_ptr<AllToAllExpertDispatcher> dispatcher;
  if (ep.active()) {
    dispatcher = std::make_shared<AllToAllExpertDispatcher>(*ep.ep_group, mcfg.moe.num_experts);
    model->set_expert_dispatcher(dispatcher);
    log::info(log::format(
        "expert parallelism: ep=%d, this rank holds experts [%lld, %lld) of %lld per MoE layer; "
        "%d replica(s) of each expert",
        ep.ep, (long long)ep.placement.first, (long long)(ep.placement.first + ep.placement.count),
        (long long)mcfg.moe.num_experts, group.size() / ep.ep));
  }
  // What the step optimises: the LM loss, or distillation (whose feature projections, when the
  // widths differ, train beside the model in the same flat buffers).
  std::shared_ptr<Objective> objective = std::make_shared<LmObjective>();
  if (distill) {
    objective =
        make_distill_objective(cfg, rt, mcfg, tokenizer.hash(), windows->teacher_cache(), seed);
  } else if (temporal) {
    objective = make_temporal_objective(cfg, *model, rt, seed);
  }
  // Validation scores the run's loss without training-only terms: the LM loss for LM and
  // distillation runs, the answer loss for a temporal run.
  std::shared_ptr<Objective> val_objective = temporal ? objective : std::make_shared<LmObjective>();
  optim::FlatParams flat(trained_param_sources(*model, objective.get()),
                         optim::flat_pad_multiple(cfg, group.size()));
  flat.set_expert_first(ep.placement.first);
  auto optimizer_ptr =
      optim::make_optimizer(cfg, flat, group, ep.active() ? ep.ep_group.get() : nullptr);
  optim::Optimizer& optimizer = *optimizer_ptr;
  const auto schedule = optim::LrSchedule::from_config(cfg, max_steps);

  log::info(mcfg.describe());
  if (lora.enabled()) {
    log::info(log::format("LoRA: rank %lld, alpha %g, targets %s: %lld trainable parameters",
                          (long long)lora.rank, lora.alpha, cfg.get_string("lora.targets").c_str(),
                          (long long)flat.num_parameters()));
  }
  log::info(plan.describe());
  log::info(log::format("optimizer: %s, %.1f MiB of state on this rank", optimizer.name().c_str(),
                        optimizer.state_bytes() / 1048576.0));
  if (!streaming) {
    log::info(log::format("data: %lld train %s (%lld steps/epoch), %lld val %s; %lld steps",
                          (long long)data->train_samples(), data->sample_name().c_str(),
                          (long long)steps_per_epoch, (long long)data->val_samples(),
                          data->sample_name().c_str(), (long long)max_steps));
  }

  // ---- resume, else initial weights from another checkpoint (e.g. `lmtrain import hf`)
  bool resumed = false;
  if (!resume.empty() && resume != "none") {
    auto dir = CheckpointStore::resolve(resume, run_dir);
    if (!dir) {
      if (resume != "auto") throw UsageError("checkpoint.resume = '" + resume + "': not found");
      log::info("resume=auto: no checkpoint in " + run_dir + ", starting fresh");
    } else {
      auto ckpt = CheckpointStore::load(*dir, /*allow_fallback=*/true);
      check_start_checkpoint(ckpt, cfg, tokenizer.hash(), data_dir, /*hash_required=*/true);
      // The saved data position counts windows of the saved data.seq_len: with another length
      // it would point somewhere else in the epoch, silently.
      // (A stream's position counts documents and tokens: it holds at any length.)
      const int64_t saved_len = checkpoint_config(ckpt).get_int("data.seq_len");
      if (saved_len != cfg.get_int("data.seq_len") && !streaming) {
        throw UsageError(log::format(
            "checkpoint %s was trained with data.seq_len = %lld, this run has %lld: its data "
            "position (window %lld of epoch %lld) means other tokens at another length; resume "
            "with --data.seq_len=%lld, or start a new run from its weights with "
            "--model.init_from=%s",
            ckpt.dir.c_str(), (long long)saved_len, (long long)cfg.get_int("data.seq_len"),
            (long long)ckpt.meta.value("data_cursor", int64_t{0}),
            (long long)ckpt.meta.value("epoch", int64_t{0}), (long long)saved_len,
            ckpt.dir.c_str()));
      }
      state = restore_training_checkpoint(ckpt, *model, optimizer, objective->trained_module());
      check_stream_resume(ckpt, state, stream, group.size());
      resumed = true;
      log::info(log::format("resumed from %s: step %lld, epoch %lld, data cursor %lld",
                            ckpt.dir.c_str(), (long long)state.step,
                            (long long)state.position.epoch, (long long)state.position.cursor));
      if (state.step >= max_steps) {
        log::info(log::format(
            "the run in %s is already complete: %s is at step %lld of %lld (train.max_steps); "
            "nothing to train (raise train.max_steps to go on)",
            run_dir.c_str(), ckpt.dir.c_str(), (long long)state.step, (long long)max_steps));
        TrainResult done;
        done.steps_done = state.step;
        done.last_checkpoint = ckpt.dir;
        done.already_complete = true;
        group.barrier();  // rank 0 hosts the TCPStore: nobody leaves while another rank needs it
        return done;
      }
    }
  }
  const std::string init_from = cfg.get_string("model.init_from");
  if (!resumed && !init_from.empty() && !temporal) {
    auto dir = CheckpointStore::resolve(init_from, init_from);
    if (!dir) throw UsageError("model.init_from = '" + init_from + "': no checkpoint there");
    auto src = CheckpointStore::load(*dir, /*allow_fallback=*/false, {"model.safetensors"});
    refuse_lora_init_source(src);
    // Imported models may carry a tokenizer lmtrain cannot hash: then there is nothing to check.
    check_start_checkpoint(src, cfg, tokenizer.hash(), data_dir, /*hash_required=*/false);
    state.lora_base = load_init_weights(*model, src);
    log::info((lora.enabled() ? "LoRA base (frozen) from " : "initial weights from ") + src.dir);
  }

  if (stream) {
    // Each rank goes on from its own saved position; validation keeps the windows an evaluation
    // reads (train.eval_batches micro-batches of every rank).
    const auto start = resumed ? data::StreamPosition::from_json(
                                     state.stream.at("positions").at(static_cast<size_t>(rank)))
                               : stream->fresh_position();
    stream->start(start, plan.micro_batch,
                  cfg.get_int("train.eval_batches") * plan.micro_batch * group.size());
    log::info("data: " + stream->describe() + log::format("; %lld steps", (long long)max_steps));
    if (stream->val_samples() == 0) {
      log::warn(
          "data.stream.inputs holds no validation window (one unit, or data.stream.val_fraction "
          "= 0): the run is not evaluated; give several files or parquet row groups");
    }
  }
  if (is_main) core::write_file_atomic(run_dir + "/config.yaml", cfg.to_yaml());
  CheckpointStore store(run_dir, static_cast<int>(cfg.get_int("checkpoint.keep_last")));
  MetricsLogger metrics(run_dir, is_main, cfg.get_bool("log.tensorboard"), max_steps);
  const std::string tokenizer_json = core::read_file(tok_path);

  TrainResult result;
  const int64_t log_every = cfg.get_int("log.every");
  const int64_t eval_every = cfg.get_int("train.eval_every");
  const int64_t eval_batches = cfg.get_int("train.eval_batches");
  const int64_t ckpt_every = cfg.get_int("checkpoint.every");
  const bool ckpt_every_epoch = cfg.get_bool("checkpoint.every_epoch");
  const double grad_clip = cfg.get_float("train.grad_clip");
  const double timeout_s = cfg.get_float("dist.timeout_s");

  core::install_stop_handlers();
  model->train();
  double train_seconds = 0, interval_seconds = 0;
  int64_t interval_tokens = 0;
  const int64_t start_step = state.step;
  const int workers = resolve_workers(cfg.get_int("train.workers"), run.threads, plan.micro_batch);
  sync_replicas(group, flat, optimizer, state, ep.active() ? ep.replica_group.get() : nullptr);
  const auto bucket_bytes = static_cast<int64_t>(cfg.get_float("dist.bucket_mb") * (1 << 20));
  TrainStepper stepper(*model, flat, optimizer, group, rt, workers, seed, bucket_bytes,
                       LossScaler(rt.loss_scaling(), cfg.get_float("train.loss_scale"),
                                  cfg.get_int("train.loss_scale_window")),
                       &ep);
  stepper.set_objective(objective);
  stepper.set_masked_targets(temporal);  // only a temporal row's answer tokens are targets
  std::unique_ptr<CudaGraphStep> graphed;
  if (cuda_graphs) {
    graphed =
        std::make_unique<CudaGraphStep>(stepper, optimizer, cfg.get_int("train.cuda_graph_warmup"));
  }
  const auto metric_names = stepper.objective().metric_names();
  // A resumed fp16 run continues with its saved scale; anything else starts at
  // train.loss_scale.
  if (state.loss_scale) stepper.loss_scaler().restore(*state.loss_scale);
  if (rt.loss_scaling()) {
    log::info(log::format("fp16 loss scale %.6g (doubles after %lld clean steps)",
                          stepper.loss_scaler().scale(),
                          (long long)cfg.get_int("train.loss_scale_window")));
  }

  auto save = [&](std::optional<double> val_loss, std::optional<int64_t> ended_epoch) {
    if (stepper.loss_scaler().enabled()) state.loss_scale = stepper.loss_scaler().state();
    if (stream) {  // every rank's position, gathered for rank 0's checkpoint
      const auto mine = position_values(stream->position());
      const auto all = dist::all_gather_values(group, mine);
      nlohmann::json positions = nlohmann::json::array();
      for (size_t r = 0; r < all.size(); r += mine.size()) {
        data::StreamPosition p;
        p.epoch = all[r];
        p.unit = all[r + 1];
        p.document = all[r + 2];
        p.token = all[r + 3];
        p.rank = static_cast<int>(all[r + 4]);
        p.world = static_cast<int>(all[r + 5]);
        positions.push_back(p.to_json());
      }
      state.stream = {{"positions", positions}, {"corpus", stream->corpus_fingerprint()}};
    }
    if (optimizer.sharded()) {
      // Each rank writes its own optimizer shard; rank 0 then moves them into the checkpoint.
      if (!is_main) write_optimizer_shard(run_dir, state.step, rank, optimizer);
      group.barrier();
    }
    // EP: every rank contributes its experts to rank 0's complete checkpoint.
    auto full_experts = gather_expert_state(ep, *model, optimizer);
    if (!is_main) return;
    CheckpointInputs in{cfg,
                        *model,
                        optimizer,
                        state,
                        group.size(),
                        tokenizer_json,
                        tokenizer.hash(),
                        std::move(full_experts),
                        objective->trained_module()};
    result.last_checkpoint =
        save_training_checkpoint(store, in, val_loss, result.last_loss, ended_epoch);
    log::info("saved checkpoint " + result.last_checkpoint);
  };

  log::info(
      log::format("step workers: %d (each micro-batch split into %d slice(s))", workers, workers));
  if (group.size() > 1) {
    log::info(log::format("gradient sync: %zu bucket(s) of <= %.3g MiB over %s, %d ranks",
                          stepper.grad_sync().buckets().size(), cfg.get_float("dist.bucket_mb"),
                          group.backend().c_str(), group.size()));
  }
  double interval_comm_s = 0, interval_a2a_s = 0, interval_data_wait_s = 0;
  int64_t interval_steps = 0;
  std::vector<int64_t> moe_layer_index;  // block index of each MoE layer, for the metrics
  for (int64_t l = 0; l < mcfg.n_layer; ++l) {
    if (mcfg.moe.is_moe_layer(l)) moe_layer_index.push_back(l);
  }
  while (state.step < max_steps) {
    const auto t0 = Clock::now();
    const double lr = schedule.at(state.step);
    auto next_batch = [&](int64_t m) {
      std::vector<int64_t> positions;
      for (int64_t slot : plan.slots(rank, m)) positions.push_back(state.position.cursor + slot);
      return data->train_batch(state.position.epoch, positions, rt.device);
    };
    auto r = graphed ? graphed->step(plan.accum_steps, next_batch, lr, grad_clip)
                     : stepper.step(plan.accum_steps, next_batch, lr, grad_clip);
    ++state.step;
    core::maybe_inject_fault(rank, state.step);
    state.position.cursor += plan.global_windows;
    bool epoch_ended = false;
    if (stream) {
      state.position.epoch = stream->position().epoch;  // this rank's (the logs' epoch)
    } else if (state.position.cursor + plan.global_windows > data->train_samples()) {
      ++state.position.epoch;  // the remainder of this epoch's order is dropped
      state.position.cursor = 0;
      epoch_ended = true;
    }
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
    interval_seconds += dt;
    interval_tokens += plan.tokens_per_step();
    interval_comm_s += r.comm_wait_s;
    if (dispatcher) interval_a2a_s += dispatcher->take_comm_seconds();
    ++interval_steps;

    if (log_now) {
      StepMetrics m;
      m.step = state.step;
      m.epoch = state.position.epoch;
      m.loss = result.last_loss;
      const auto values = r.metric_values();
      for (size_t i = 0; i < metric_names.size(); ++i)
        m.terms.emplace_back(metric_names[i], values[i]);
      m.lr = lr;
      m.grad_norm = r.grad_norm_value();
      m.loss_scale = stepper.loss_scaler().enabled() ? stepper.loss_scaler().scale() : 0;
      m.skipped_steps = stepper.loss_scaler().state().skipped_steps;
      m.peak_mem_bytes = core::peak_device_memory(rt.device);
      m.tokens_per_s = interval_tokens / std::max(interval_seconds, 1e-9);
      if (temporal) {
        m.samples_per_s = static_cast<double>(interval_steps * plan.global_windows) /
                          std::max(interval_seconds, 1e-9);
      }
      m.elapsed_s = train_seconds;
      if (stream) {
        const double waited = stream->wait_seconds();
        m.data_wait_ms = 1e3 * (waited - interval_data_wait_s) / interval_steps;
        interval_data_wait_s = waited;
      }
      m.comm_wait_ms = group.size() > 1 ? 1e3 * interval_comm_s / interval_steps : -1;
      m.moe = summarize_moe(r.moe, moe_layer_index);
      m.a2a_ms = dispatcher ? 1e3 * interval_a2a_s / interval_steps : -1;
      metrics.log_step(m);
      interval_seconds = 0;
      interval_tokens = 0;
      interval_comm_s = 0;
      interval_a2a_s = 0;
      interval_steps = 0;
    }
    std::optional<double> val_loss;
    if (eval_now) {
      val_loss = evaluate(*model, *val_objective, *data, plan.micro_batch, eval_batches, group, rt);
      if (dispatcher) dispatcher->take_comm_seconds();  // eval exchanges are not step time
      metrics.log_eval(state.step, *val_loss);
      if (is_main) report::refresh_run_report(cfg);  // RUN_DIR/report.html (log.report)
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
  // Rank 0 hosts the TCPStore: nobody leaves while another rank may still need it.
  group.barrier();
  if (result.stop_signal) {
    // Not "done": the exit code (128 + signal) and this line tell a scheduler it was cut short.
    log::warn(log::format(
        "stopped by signal %d (%s) at step %lld of %lld; checkpoint %s saved: continue with "
        "--resume=auto",
        result.stop_signal, ::strsignal(result.stop_signal), (long long)state.step,
        (long long)max_steps,
        result.last_checkpoint.empty() ? "(on rank 0)" : result.last_checkpoint.c_str()));
    return result;
  }
  if (stream) {
    log::info(log::format(
        "stream loader: the steps waited %.2f s for tokens in %s of training; the queue held up "
        "to %zu of %lld micro-batches",
        stream->wait_seconds(), format_duration(train_seconds).c_str(), stream->max_queued(),
        (long long)cfg.get_int("data.stream.queue_batches")));
  }
  log::info(log::format(
      "done: %lld steps, last loss %.4f%s, %s of training", (long long)state.step, result.last_loss,
      result.last_val_loss ? log::format(", val loss %.4f", *result.last_val_loss).c_str() : "",
      format_duration(train_seconds).c_str()));
  return result;
}

}  // namespace lmtrain::train
