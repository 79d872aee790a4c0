// Where a run starts (train/run_setup_steps.h): a resumed checkpoint, checked against this
// run's model, tokenizer, data position and stream, or model.init_from's initial weights.
#include <string>
#include <vector>

#include "checkpoint/checkpoint_config.h"
#include "checkpoint/checkpoint_store.h"
#include "checkpoint/local_lora_base.h"
#include "checkpoint/lora_checkpoint.h"
#include "core/error.h"
#include "core/log.h"
#include "parallel/frozen_shard.h"
#include "train/expert_resume.h"
#include "train/init_from_shard.h"
#include "train/run_setup_steps.h"

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

}  // namespace

// ---- resume, else initial weights from another checkpoint (e.g. `lmtrain import hf`)
void resume_or_init(RunSetup& s, dist::Group& group) {
  const std::string& run_dir = s.options.run_dir;
  const CheckpointRequest& resume = s.options.resume;
  const std::string tokenizer_from = tokenizer_source(s.setup);
  const std::string& tokenizer_hash = s.tokenizer->hash();
  if (resume.any()) {
    const auto& dir = s.resume_dir;  // resolved once by set_up_run
    if (!dir) {
      if (resume.kind != CheckpointRequest::Kind::kAuto) {
        throw UsageError("checkpoint.resume = '" + resume.text + "': not found");
      }
      log::info("resume=auto: no checkpoint in " + run_dir + ", starting fresh");
    } else {
      // ZeRO-3's sharded set-up (build_model_and_optimizer decided it): this rank's shard of
      // the parameters and of the moments, by range; the model is never written whole.
      const bool into_shard = s.flat->shard_only();
      // Else the restore reads every tensor by range, only what this rank keeps (a ZeRO shard of
      // the moments, tensor parallelism's slices; expert parallelism its own experts from a sharded
      // checkpoint, train/expert_resume.h): no file is loaded whole here. (Into the shard also
      // beside an objective's parameters, a distillation run's projections: read whole into
      // their module by restore_training_shard; the whole path keeps its stacks whole then.)
      const bool ep_by_range =
          s.ep.active() && !s.tp && (into_shard || s.objective->trained_module() == nullptr);
      auto ckpt = CheckpointStore::load(*dir, /*allow_fallback=*/true, {},
                                        /*tensors_by_range=*/true);
      // (Into the shards its experts' rows of an unsharded checkpoint's stacks too.)
      const bool experts_by_range = ep_by_range && (into_shard || has_model_shards(ckpt.meta));
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
          s.tp ? s.tp->localizer()
               : (experts_by_range ? ep_localizer(*s.model, s.ep.ep_rank, s.ep.ep)
                                   : TensorLocalizer{});
      // (A LoRA checkpoint into the shards: its base's frozen pieces are read when FullyShard
      // shards them, from `frozen`.)
      FrozenInit frozen;
      s.state = into_shard ? restore_training_shard(ckpt, *s.model, *s.flat, *s.optimizer, frozen,
                                                    localize, s.objective->trained_module())
                           : restore_training_checkpoint(ckpt, *s.model, *s.optimizer,
                                                         s.objective->trained_module(), localize);
      if (frozen.read) s.frozen_source = std::move(frozen.read);
      s.resumed = true;
      log::info(log::format("resumed from %s: step %lld, epoch %lld, data cursor %lld%s",
                            ckpt.dir.c_str(), (long long)s.state.step,
                            (long long)s.state.position.epoch, (long long)s.state.position.cursor,
                            into_shard ? " (this rank's shard only, read by range)" : ""));
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
    // Under TP each rank reads only its slices, by range, as a resume does; under ZeRO-3's
    // sharded set-up only its shard's rows (train/init_from_shard.h).
    const bool sharded = s.flat->shard_only();
    auto src = CheckpointStore::load(*dir, /*allow_fallback=*/false, {"model.safetensors"},
                                     /*tensors_by_range=*/s.tp != nullptr || sharded);
    refuse_lora_init_source(src);
    // Imported models may carry a tokenizer lmtrain cannot hash: then there is nothing to check.
    check_start_checkpoint(src, s.setup.model, tokenizer_hash, tokenizer_from,
                           /*hash_required=*/false);
    if (s.tp) {
      s.state.lora_base = load_local_init_weights(src, *s.model, s.tp->localizer());
    } else if (sharded) {
      // ZeRO-3's sharded set-up: this rank's rows of each tensor, into its shard; a LoRA
      // base's frozen pieces are read when FullyShard shards them.
      // Under expert parallelism each rank's experts whole, its rows of each saved stack.
      load_init_shard(
          src, *s.model, *s.flat, /*adapters=*/false,
          s.ep.active() ? ep_localizer(*s.model, s.ep.ep_rank, s.ep.ep) : TensorLocalizer{});
      if (parallel::frozen_param_bytes(*s.model) > 0) {
        auto frozen = frozen_init_source(src, *s.model);
        s.frozen_source = std::move(frozen.read);
        s.state.lora_base = std::move(frozen.lora_base);
      }
    } else {
      s.state.lora_base = load_init_weights(*s.model, src);
    }
    log::info(
        (s.setup.model.lora.enabled() ? "LoRA base (frozen) from " : "initial weights from ") +
        src.dir + (sharded ? " (this rank's shard only, read by range)" : ""));
  }
}

}  // namespace lmtrain::train
