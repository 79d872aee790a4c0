#include "train/run_setup.h"

#include <algorithm>
#include <optional>

#include "checkpoint/checkpoint_config.h"
#include "checkpoint/checkpoint_store.h"
#include "core/error.h"
#include "core/log.h"
#include "distill/distill_setup.h"
#include "distill/teacher.h"
#include "distill/teacher_cache.h"
#include "train/chat_data.h"
#include "train/run_setup_steps.h"
#include "train/temporal_setup.h"

namespace lmtrain::train {
namespace {

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
  s->resume_dir = CheckpointStore::resolve(options.resume, options.run_dir);
  build_model_and_optimizer(*s, temporal_lm, group, rt, tp);
  resume_or_init(*s, group);
  if (s->stream && s->complete_checkpoint.empty()) start_stream(*s, group);
  return s;
}

}  // namespace lmtrain::train
