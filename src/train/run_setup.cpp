#include "train/run_setup.h"

#include <algorithm>
#include <optional>

#include "checkpoint/checkpoint_config.h"
#include "checkpoint/checkpoint_store.h"
#include "checkpoint/local_lora_base.h"
#include "checkpoint/lora_checkpoint.h"
#include "core/error.h"
#include "core/log.h"
#include "distill/distill_setup.h"
#include "distill/teacher.h"
#include "distill/teacher_cache.h"
#include "model/build_model.h"
#include "model/lora.h"
#include "optim/optimizer_factory.h"
#include "train/chat_data.h"
#include "train/expert_resume.h"
#include "train/temporal_setup.h"

namespace lmtrain::train {
namespace {

// The key that gives this run its tokenizer, with its value, for messages: a stream's
// data.stream.tokenizer, else the data directory holding tokenizer.json.
std::string tokenizer_source(const SetupOptions& setup) {
  if (setup.data.source == DataSource::kStream && !setup.data.stream.tokenizer.empty()) {
    return "data.stream.tokenizer = " + setup.data.stream.tokenizer;
  }
  return "data.dir = " + (setup.temporal ? setup.data.temporal.dir : setup.data.dir);
}

// A checkpoint a run starts from must hold this run's model and have been trained on this run's
// tokenizer (when it records one, or always with hash_required).
void check_start_checkpoint(const LoadedCheckpoint& ckpt, const model::ModelOptions& model,
                            const std::string& tokenizer_hash, const std::string& tokenizer_from,
                            bool hash_required) {
  check_model_compatible(ckpt, model);
  const std::string saved = ckpt.meta.value("tokenizer_hash", "");
  if ((hash_required || !saved.empty()) && saved != tokenizer_hash) {
    throw UsageError("checkpoint " + ckpt.dir + " was trained with a different tokenizer (" +
                     (saved.empty() ? std::string("none recorded") : saved) + ") than " +
                     tokenizer_from + " (" + tokenizer_hash + ")");
  }
}

// tokens_per_step: what one optimizer step trains on (train.target_param_data_ratio).
int64_t resolve_max_steps(const SetupOptions& setup, int64_t steps_per_epoch, bool streamed,
                          int64_t tokens_per_step) {
  int64_t max_steps = setup.max_steps;
  const int64_t epochs = setup.epochs;
  if (max_steps == 0 && epochs == 0 && setup.target_param_data_ratio > 0) {
    // nanochat's base_train: target tokens = ratio * scaling params, steps = tokens // batch.
    const int64_t params = setup.model.shape.scaling_params();
    const auto tokens = static_cast<int64_t>(setup.target_param_data_ratio * params);
    max_steps = std::max<int64_t>(tokens / tokens_per_step, 1);
    log::info(log::format(
        "train.target_param_data_ratio = %g: %lld steps (%.3gM scaling parameters, %lld tokens "
        "per step)",
        setup.target_param_data_ratio, (long long)max_steps, params / 1e6,
        (long long)tokens_per_step));
    return max_steps;
  }
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
  if (max_steps == 0) {
    max_steps = epochs * steps_per_epoch;
  } else if (epochs != 0) {
    // Both set (a preset's max_steps and --train.epochs, say): max_steps wins, and the run says
    // so now rather than after training for another length than asked.
    log::warn(log::format(
        "train.max_steps = %lld and train.epochs = %lld are both set: train.max_steps wins "
        "(%lld steps, %.2f epochs of %lld steps); give --train.max_steps=0 to train for "
        "train.epochs",
        (long long)max_steps, (long long)epochs, (long long)max_steps,
        steps_per_epoch > 0 ? static_cast<double>(max_steps) / steps_per_epoch : 0.0,
        (long long)steps_per_epoch));
  }
  return max_steps;
}

// What a streaming run cannot be combined with, named (every rank alike).
void check_stream_config(const RunSetup& s) {
  struct Refused {
    bool set;
    const char* key;
    const char* why;
  };
  const Refused refused[] = {
      {s.setup.temporal, "model.temporal.enabled",
       "that run reads prepared windows (data.source = prepared)"},
      {s.setup.distill.enabled, "distill.enabled",
       "that run reads prepared windows (data.source = prepared)"},
      {s.options.loop.checkpoint_every_epoch, "checkpoint.every_epoch",
       "each rank's epoch of a stream ends at another step (use checkpoint.every)"}};
  for (const auto& [set, key, why] : refused) {
    if (set) {
      throw UsageError(std::string("data.source = stream and ") + key + " = true: " + why);
    }
  }
}

// What a stream's units, their split and their order (so every saved position) depend on
// besides the files: a resume with another value would go on elsewhere in the text.
const std::vector<std::string> kStreamPositionKeys = {
    "data.stream.block_mb", "data.stream.val_fraction", "train.seed",
    "data.shuffle",         "data.stream.text_column",  "data.stream.doc_separator"};

// A checkpoint resumed by a run of the other data source, another world size, other stream
// settings or other input files would go on from a position that does not exist: refused,
// naming what differs. `saved_stream` is meta.json's "stream" (null for prepared windows).
void check_stream_resume(const LoadedCheckpoint& ckpt, const nlohmann::json& saved_stream,
                         const StreamData* stream, int world, const std::string& run_yaml) {
  if (!stream) {
    if (!saved_stream.is_null()) {
      throw UsageError("checkpoint " + ckpt.dir +
                       " was trained with data.source = stream: resume it with "
                       "--data.source=stream and its data.stream.inputs, or start a new run "
                       "from its weights with --model.init_from=" +
                       ckpt.dir);
    }
    return;
  }
  if (saved_stream.is_null()) {
    throw UsageError("checkpoint " + ckpt.dir +
                     " was trained on prepared windows (data.source = prepared): a stream "
                     "cannot go on from its data position; start a new run from its weights "
                     "with --model.init_from=" +
                     ckpt.dir);
  }
  const auto& positions = saved_stream.at("positions");
  if (static_cast<int>(positions.size()) != world) {
    throw UsageError(log::format(
        "checkpoint %s was saved by a streaming run of %zu rank(s); this run has %d: each "
        "rank's stream position covers the units of that world size only, so a stream resumes "
        "at the world size it was saved at (or start a new run from its weights with "
        "--model.init_from=%s)",
        ckpt.dir.c_str(), positions.size(), world, ckpt.dir.c_str()));
  }
  const auto changed = changed_settings(ckpt, run_yaml, kStreamPositionKeys);
  if (!changed.empty()) {
    std::string was, flags;
    for (const auto& c : changed) {
      was += (was.empty() ? "" : ", ") + c.key + " = " + c.saved + " (this run: " + c.now + ")";
      flags += " --" + c.key + "=" + c.saved;
    }
    throw UsageError("checkpoint " + ckpt.dir + " was streamed with " + was +
                     ": the stream's units and their order, so its saved positions, depend on "
                     "them; resume with" +
                     flags +
                     ", or start a new run from its weights with --model.init_from=" + ckpt.dir);
  }
  if (saved_stream.at("corpus").get<std::string>() != stream->corpus_fingerprint()) {
    throw UsageError("checkpoint " + ckpt.dir +
                     " was streamed from other input files (their paths or sizes differ from "
                     "data.stream.inputs now): its positions would point into other text; "
                     "resume with the same files, or start a new run with --model.init_from=" +
                     ckpt.dir);
  }
}

// ---- data: token windows of data.dir, a stream of raw files (data.source = stream), or
// (model.temporal.enabled) time-series QA rows in the frozen LM's tokenizer, whose shape the run
// adopts. Returns the frozen LM's checkpoint of a temporal run.
std::optional<LoadedCheckpoint> open_data(RunSetup& s, ConfigSnapshot& snapshot,
                                          dist::Group& group) {
  SetupOptions& setup = s.setup;
  std::optional<LoadedCheckpoint> temporal_lm;
  const bool streaming = setup.data.source == DataSource::kStream;
  if (setup.data.format == DataFormat::kChat && (streaming || setup.temporal)) {
    throw UsageError(std::string("data.format = chat reads the conversations `lmtrain prepare "
                                 "--chat` wrote to data.dir; it does not go with ") +
                     (streaming ? "data.source = stream" : "model.temporal.enabled"));
  }
  if (setup.data.document_mask &&
      (setup.data.format == DataFormat::kChat || setup.temporal || setup.distill.enabled)) {
    throw UsageError(std::string("data.document_mask splits token windows at <|endoftext|> for "
                                 "the LM loss; it does not go with ") +
                     (setup.data.format == DataFormat::kChat
                          ? "data.format = chat (pack its conversations with data.chat.pack)"
                      : setup.temporal ? "model.temporal.enabled"
                                       : "distill.enabled"));
  }
  if (streaming) check_stream_config(s);
  if (streaming) {
    auto stream_data =
        std::make_unique<StreamData>(setup.data, s.options.seed, group.rank(), group.size());
    s.stream = stream_data.get();
    s.tokenizer_path = stream_data->tokenizer_path();
    s.tokenizer = &stream_data->tokenizer();
    s.data = std::move(stream_data);
  } else if (s.setup.temporal) {
    temporal_lm = temporal_lm_checkpoint(s.options.init_from);
    setup.model = snapshot.adopt_lm_shape(*temporal_lm);
    s.tokenizer_path = temporal_lm->dir + "/tokenizer.json";
    auto tok = data::BpeTokenizer::load_hf(s.tokenizer_path);
    // The encoder maps into the LM's width (and, vocab_mix, its vocabulary): adopted above.
    setup.encoder = encoder_for_lm(setup.encoder, setup.model.shape);
    auto temporal_data =
        make_temporal_data(setup.data, setup.encoder, std::move(tok), s.options.seed);
    s.tokenizer = &temporal_data->tokenizer();
    s.data = std::move(temporal_data);
  } else if (setup.data.format == DataFormat::kChat) {
    // SFT: one conversation per row, the loss on the assistant's tokens (chat_data.h).
    if (setup.distill.enabled) {
      throw UsageError(
          "data.format = chat trains on the assistant's tokens with the LM loss; "
          "distillation (distill.enabled) reads token windows: use one or the other");
    }
    auto chat_data =
        std::make_unique<ChatData>(setup.data.dir, setup.data.seq_len, setup.data.chat_bucket,
                                   s.options.seed, setup.data.shuffle, setup.data.chat_pack);
    s.tokenizer_path = chat_data->tokenizer_path();
    s.tokenizer = &chat_data->tokenizer();
    s.data = std::move(chat_data);
  } else {
    auto token_data = std::make_unique<TokenWindowData>(setup.data.dir, setup.data.seq_len,
                                                        s.options.seed, setup.data.shuffle);
    s.windows = token_data.get();
    s.tokenizer_path = token_data->tokenizer_path();
    s.tokenizer = &token_data->tokenizer();
    s.data = std::move(token_data);
  }

  setup.model.shape.fill_vocab_size(static_cast<int64_t>(s.tokenizer->vocab_size()));
  snapshot.record_vocab_size(setup.model.shape.vocab_size);
  const int64_t steps_per_epoch = s.data->train_samples() / s.options.batch.global_windows;
  if (steps_per_epoch == 0 && !streaming) {
    throw UsageError(log::format(
        "the training split has %lld %s of %lld tokens, fewer than one global batch "
        "(%lld rows): lower train.total_batch_size / train.micro_batch_size or data.seq_len",
        (long long)s.data->train_samples(), s.data->sample_name().c_str(),
        (long long)s.options.batch.seq_len, (long long)s.options.batch.global_windows));
  }
  s.max_steps =
      resolve_max_steps(setup, steps_per_epoch, streaming, s.options.batch.tokens_per_step());
  if (!streaming) {
    log::info(log::format("data: %lld train %s (%lld steps/epoch), %lld val %s; %lld steps",
                          (long long)s.data->train_samples(), s.data->sample_name().c_str(),
                          (long long)steps_per_epoch, (long long)s.data->val_samples(),
                          s.data->sample_name().c_str(), (long long)s.max_steps));
    if (s.setup.temporal && s.data->val_samples() == 0) {
      log::warn(
          "data.temporal.val_fraction = 0: no validation samples, so the run is not evaluated");
    }
  }
  return temporal_lm;
}

// ---- distillation: the teacher's logits from a cache, or the teacher's checkpoint (one to
// train first was trained by the caller, before this run)
void set_up_teacher(RunSetup& s, ConfigSnapshot& snapshot) {
  DistillOptions& distill = s.setup.distill;
  if (!distill.enabled && !distill.cache.empty()) {
    log::warn("distill.cache = " + distill.cache +
              " is ignored: distill.enabled is false (add --distill.enabled=true to distill from "
              "it)");
  }
  if (distill.enabled && !distill.cache.empty()) {
    s.windows->set_teacher_cache(open_teacher_cache(distill, s.windows->train_shard(),
                                                    s.windows->train_stream(), s.tokenizer->hash(),
                                                    s.setup.model.shape.vocab_size));
    distill.teacher = s.windows->teacher_cache()->info().teacher;
    snapshot.record_teacher(distill.teacher, "distill.cache");
  } else if (distill.enabled) {
    distill.teacher = resolve_teacher(distill.teacher);
    snapshot.record_teacher(distill.teacher, "resolved teacher");
  }
}

// ---- model (with its experts placed), objective, flat parameters, optimizer and schedule
void build_model_and_optimizer(RunSetup& s, const std::optional<LoadedCheckpoint>& temporal_lm,
                               dist::Group& group, const core::Runtime& rt, dist::Group* tp) {
  const SetupOptions& setup = s.setup;
  const uint64_t seed = s.options.seed;
  s.ep = make_expert_parallel(group, setup.ep, s.setup.model.shape.moe.num_experts);
  const auto& lora = setup.model.lora;
  if (lora.enabled() && s.options.init_from.empty()) {
    throw UsageError(
        "config key 'lora.rank' > 0 fine-tunes a frozen base: set model.init_from to an lmtrain "
        "checkpoint or an `lmtrain import hf` directory");
  }
  torch::manual_seed(seed);
  // A temporal run's LM comes whole from model.init_from: nothing to initialise but LoRA
  // adapters (its second stage).
  s.model = model::build_model(setup.model, rt,
                               {/*init=*/!s.setup.temporal || lora.enabled(), s.ep.placement});
  if (s.setup.temporal) {
    // Before the encoder: its projector starts at the scale of the LM's token embeddings.
    s.state.lora_base = load_init_weights(*s.model, *temporal_lm);
    log::info("frozen LM from " + temporal_lm->dir);
  }
  if (tp) {
    // Every TP rank built the same whole model from the seed: each keeps its slices, before
    // the flat buffers are laid out over them.
    parallel::check_tensor_parallel(s.setup.model.shape, setup.data.seq_len, tp->size());
    s.tp = std::make_unique<parallel::TensorParallel>(*s.model, *tp);
    log::info(
        log::format("tensor parallelism: tp=%d (rank %d of its TP group), sequence-parallel; %d "
                    "data-parallel replica(s)",
                    tp->size(), tp->rank(), group.size()));
  }
  if (s.ep.active()) {
    s.dispatcher = std::make_shared<AllToAllExpertDispatcher>(*s.ep.ep_group,
                                                              s.setup.model.shape.moe.num_experts);
    s.model->set_expert_dispatcher(s.dispatcher);
    log::info(log::format(
        "expert parallelism: ep=%d, this rank holds experts [%lld, %lld) of %lld per MoE layer; "
        "%d replica(s) of each expert",
        s.ep.ep, (long long)s.ep.placement.first,
        (long long)(s.ep.placement.first + s.ep.placement.count),
        (long long)s.setup.model.shape.moe.num_experts, group.size() / s.ep.ep));
  }
  // What the step optimises: the LM loss, or distillation (whose feature projections, when the
  // widths differ, train beside the model in the same flat buffers).
  // data.document_mask: windows split into documents after each <|endoftext|>.
  // (eot_id() is unsigned: without the cast the -1 of "no mask" became 4294967295, a token that
  // never matches, and every run took the document-masked path.)
  const int64_t document_end =
      setup.data.document_mask ? static_cast<int64_t>(s.tokenizer->eot_id()) : int64_t{-1};
  s.objective = std::make_shared<LmObjective>(document_end);
  if (setup.distill.enabled) {
    s.objective = make_distill_objective(setup.distill, setup.data.seq_len, rt, s.setup.model.shape,
                                         s.tokenizer->hash(), s.windows->teacher_cache(), seed);
  } else if (s.setup.temporal) {
    s.objective = make_temporal_objective(setup.encoder, *s.model, rt, seed);
  }
  // Validation scores the run's loss without training-only terms: the LM loss for LM and
  // distillation runs, the answer loss for a temporal run.
  s.val_objective = s.setup.temporal ? s.objective : std::make_shared<LmObjective>(document_end);
  // ZeRO-3 shards over the world, or under HSDP over this rank's shard group.
  if (s.options.optimizer.zero == 3) {
    s.shards = parallel::make_shard_groups(group, s.options.optimizer.shard_group_size);
  }
  dist::Group& shard_group = s.shards.shard_group(group);
  // (ZeRO-3 over several ranks: no whole gradient buffer, optim/flat_params.h.)
  s.flat = std::make_unique<optim::FlatParams>(
      trained_param_sources(*s.model, s.objective.get()),
      optim::flat_pad_multiple(s.options.optimizer, shard_group.size()),
      optim::flat_grad_buffer(s.options.optimizer, shard_group.size()));
  s.flat->set_expert_first(s.ep.placement.first);
  s.optimizer = optim::make_optimizer(s.options.optimizer, *s.flat, shard_group,
                                      s.ep.active() ? s.ep.ep_group.get() : nullptr);
  s.schedule = s.options.schedule.over(s.max_steps);

  log::info(s.setup.model.shape.describe());
  if (lora.enabled()) {
    log::info(log::format("LoRA: rank %lld, alpha %g, targets %s: %lld trainable parameters",
                          (long long)lora.rank, lora.alpha,
                          model::lora_target_list(lora.targets).c_str(),
                          (long long)s.flat->num_parameters()));
  }
  log::info(s.options.batch.describe());
  log::info(log::format("optimizer: %s, %.1f MiB of state on this rank",
                        s.optimizer->name().c_str(), s.optimizer->state_bytes() / 1048576.0));
}

// This rank's slices of a checkpoint's whole tensors under tensor parallelism, whatever layout
// saved them (sharded_reader.h): TensorParallel's cut, and the rows it keeps for reads by range.
TensorLocalizer tp_localizer(const parallel::TensorParallel& tp) {
  TensorLocalizer localize;
  const parallel::TensorParallel* plan = &tp;
  localize.cut = [plan](const std::string& name, const at::Tensor& whole) {
    return plan->local_piece(name, whole);
  };
  localize.rows = [plan](const std::string& name) {
    auto it = plan->slices().find(name);
    if (it == plan->slices().end() || !it->second.sharded()) return LocalRows{};
    return LocalRows{it->second.dim, it->second.ranges, it->second.whole_shape};
  };
  localize.tp_rank = tp.rank();
  localize.tp = tp.size();
  return localize;
}

// ---- resume, else initial weights from another checkpoint (e.g. `lmtrain import hf`)
void resume_or_init(RunSetup& s, dist::Group& group) {
  const std::string& run_dir = s.options.run_dir;
  const CheckpointRequest& resume = s.options.resume;
  const std::string tokenizer_from = tokenizer_source(s.setup);
  const std::string& tokenizer_hash = s.tokenizer->hash();
  if (resume.any()) {
    auto dir = CheckpointStore::resolve(resume, run_dir);
    if (!dir) {
      if (resume.kind != CheckpointRequest::Kind::kAuto) {
        throw UsageError("checkpoint.resume = '" + resume.text + "': not found");
      }
      log::info("resume=auto: no checkpoint in " + run_dir + ", starting fresh");
    } else {
      // The restore reads every tensor by range, only what this rank keeps (a ZeRO shard of the
      // moments, tensor parallelism's slices; expert parallelism its own experts from a sharded
      // checkpoint, train/expert_resume.h): no file is loaded whole here.
      const bool ep_by_range = s.ep.active() && !s.tp && s.objective->trained_module() == nullptr;
      auto ckpt = CheckpointStore::load(*dir, /*allow_fallback=*/true, {},
                                        /*tensors_by_range=*/true);
      const bool experts_by_range = ep_by_range && has_model_shards(ckpt.meta);
      if (experts_by_range) {
        log::info(saved_in_ep_layout(ckpt.meta, s.ep.ep)
                      ? "resume: this rank reads only its own experts' slices"
                      : "resume: this rank reads only its own experts' rows of the saved stacks");
      }
      check_start_checkpoint(ckpt, s.setup.model, tokenizer_hash, tokenizer_from,
                             /*hash_required=*/true);
      // Before anything is restored or logged as resumed.
      check_stream_resume(ckpt, ckpt.meta.value("stream", nlohmann::json()), s.stream, group.size(),
                          s.config_snapshot);
      // The saved data position counts windows of the saved data.seq_len: with another length
      // it would point somewhere else in the epoch, silently.
      // (A stream's position counts documents and tokens: it holds at any length.)
      const int64_t saved_len = checkpoint_seq_len(ckpt);
      const int64_t seq_len = s.setup.data.seq_len;
      if (saved_len != seq_len && !s.stream) {
        throw UsageError(log::format(
            "checkpoint %s was trained with data.seq_len = %lld, this run has %lld: its data "
            "position (window %lld of epoch %lld) means other tokens at another length; resume "
            "with --data.seq_len=%lld, or start a new run from its weights with "
            "--model.init_from=%s",
            ckpt.dir.c_str(), (long long)saved_len, (long long)seq_len,
            (long long)ckpt.meta.value("data_cursor", int64_t{0}),
            (long long)ckpt.meta.value("epoch", int64_t{0}), (long long)saved_len,
            ckpt.dir.c_str()));
      }
      const TensorLocalizer localize =
          s.tp ? tp_localizer(*s.tp)
               : (experts_by_range ? ep_localizer(*s.model, s.ep.ep_rank, s.ep.ep)
                                   : TensorLocalizer{});
      s.state = restore_training_checkpoint(ckpt, *s.model, *s.optimizer,
                                            s.objective->trained_module(), localize);
      s.resumed = true;
      log::info(log::format("resumed from %s: step %lld, epoch %lld, data cursor %lld",
                            ckpt.dir.c_str(), (long long)s.state.step,
                            (long long)s.state.position.epoch, (long long)s.state.position.cursor));
      if (s.state.step >= s.max_steps) {
        log::info(log::format(
            "the run in %s is already complete: %s is at step %lld of %lld (train.max_steps); "
            "nothing to train (raise train.max_steps to go on)",
            run_dir.c_str(), ckpt.dir.c_str(), (long long)s.state.step, (long long)s.max_steps));
        s.complete_checkpoint = ckpt.dir;
        return;
      }
    }
  }
  const std::string& init_from = s.options.init_from;
  if (!s.resumed && !init_from.empty() && !s.setup.temporal) {
    auto dir = CheckpointStore::resolve(init_from, init_from);
    if (!dir) throw UsageError("model.init_from = '" + init_from + "': no checkpoint there");
    // Under TP each rank reads only its slices, by range, as a resume does.
    auto src = CheckpointStore::load(*dir, /*allow_fallback=*/false, {"model.safetensors"},
                                     /*tensors_by_range=*/s.tp != nullptr);
    refuse_lora_init_source(src);
    // Imported models may carry a tokenizer lmtrain cannot hash: then there is nothing to check.
    check_start_checkpoint(src, s.setup.model, tokenizer_hash, tokenizer_from,
                           /*hash_required=*/false);
    if (s.tp) {
      s.state.lora_base = load_local_init_weights(src, *s.model, tp_localizer(*s.tp));
    } else {
      s.state.lora_base = load_init_weights(*s.model, src);
    }
    log::info(
        (s.setup.model.lora.enabled() ? "LoRA base (frozen) from " : "initial weights from ") +
        src.dir);
  }
}

// ---- a stream starts where this rank's saved position says, or at the beginning
void start_stream(RunSetup& s, dist::Group& group) {
  // Validation keeps the windows an evaluation reads (train.eval_batches micro-batches of every
  // rank).
  const auto start = s.resumed ? StreamData::resume_position(s.state.stream, group.rank())
                               : s.stream->fresh_position();
  s.stream->start(start, s.options.batch.micro_batch,
                  s.options.loop.eval_batches * s.options.batch.micro_batch * group.size());
  log::info("data: " + s.stream->describe() + log::format("; %lld steps", (long long)s.max_steps));
  if (s.stream->val_samples() == 0) {
    log::warn(
        "data.stream.inputs holds no validation window (data.stream.val_fraction = 0, one "
        "unit, or held-out units without text): the run is not evaluated; give several files "
        "or parquet row groups and data.stream.val_fraction > 0 to evaluate it");
  }
}

}  // namespace

std::unique_ptr<RunSetup> set_up_run(const RunOptions& options, const SetupOptions& setup,
                                     ConfigSnapshot& snapshot, dist::Group& group,
                                     const core::Runtime& rt, dist::Group* tp) {
  auto s = std::make_unique<RunSetup>();
  s->options = options;
  s->setup = setup;
  const auto temporal_lm = open_data(*s, snapshot, group);
  set_up_teacher(*s, snapshot);
  s->config_snapshot = snapshot.yaml();
  build_model_and_optimizer(*s, temporal_lm, group, rt, tp);
  resume_or_init(*s, group);
  if (s->stream && s->complete_checkpoint.empty()) start_stream(*s, group);
  return s;
}

}  // namespace lmtrain::train
