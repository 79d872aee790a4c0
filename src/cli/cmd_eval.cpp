#include <cmath>
#include <iostream>

#include "checkpoint/checkpoint_config.h"
#include "checkpoint/checkpoint_model.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/eval_ranks.h"
#include "cli/eval_scores.h"
#include "cli/generate_temporal.h"
#include "cli/read_options.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/progress.h"
#include "core/threads.h"
#include "data/prepared_data.h"
#include "data/token_split.h"
#include "data/window_stream.h"
#include "distributed/env.h"
#include "distributed/group.h"
#include "infer/cached_eval.h"
#include "objective/temporal_objective.h"
#include "train/evaluator.h"
#include "train/temporal_qa.h"
#include "train/temporal_setup.h"

namespace lmtrain::cli {
namespace {

// A temporal-encoder run: the answer loss on its held-out samples, and with --temporal_qa the
// accuracy per attribute against chance and the two baselines (train/temporal_qa.h).
int eval_temporal(const ParsedArgs& args, const core::Runtime& rt) {
  auto loaded = train::load_temporal_inference(args.get("checkpoint"), rt);
  core::Config cfg = train::recorded_config(loaded.lm.config_yaml, loaded.lm.checkpoint_dir);
  if (args.has("data.temporal.dir")) {
    cfg.set("data.temporal.dir", args.get("data.temporal.dir"), "--data.temporal.dir");
    cfg.set("data.temporal.online", "false", "--data.temporal.dir");
  }
  auto data = train::make_temporal_data(read_data_options(cfg), loaded.encoder->options(),
                                        *loaded.lm.tokenizer,
                                        static_cast<uint64_t>(cfg.get_int("train.seed")));
  auto group = dist::make_single_rank_group();
  train::TemporalAlignmentObjective objective(loaded.encoder);
  const int64_t B = args.get_int("batch_size", cfg.get_int("train.micro_batch_size"));
  if (B < 1) throw UsageError("--batch_size must be >= 1");
  int64_t batches = args.get_int("batches", 0);
  if (batches <= 0) batches = std::max<int64_t>(1, (data->val_samples() + B - 1) / B);
  const double loss = train::evaluate(*loaded.lm.model, objective, *data, B, batches, *group, rt);
  std::cout << log::format("checkpoint: %s (step %lld)\nval answer loss: %.4f\nsamples: %lld\n",
                           loaded.lm.checkpoint_dir.c_str(), (long long)loaded.lm.step, loss,
                           (long long)std::min(batches * B, data->val_samples()));
  if (!args.get_bool("temporal_qa")) return 0;
  train::TemporalQaOptions qa;
  qa.max_samples = args.get_int("max_samples", 0);
  const auto report = train::score_temporal_qa(*loaded.lm.model, *loaded.encoder, *data, qa);
  std::cout << train::format_temporal_qa(report);
  if (args.has("json")) {
    auto j = train::temporal_qa_json(report);
    j["checkpoint"] = loaded.lm.checkpoint_dir;
    j["step"] = loaded.lm.step;
    j["val_answer_loss"] = loss;
    // Generated text may hold invalid UTF-8 (a token cut mid-character): replaced.
    core::write_file_atomic(args.get("json"),
                            j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  }
  return 0;
}

}  // namespace

int cmd_eval(const Args& argv) {
  const std::vector<FlagSpec> flags = {
      {"checkpoint", FlagKind::kValue, "checkpoint dir, latest/best link, or run dir", "PATH"},
      {"data_dir", FlagKind::kValue, "prepared data (default: the checkpoint's data.dir)", "DIR"},
      {"data.dir", FlagKind::kValue, "the same as --data_dir", "DIR"},
      {"split", FlagKind::kValue, "val or train (default val)", "NAME"},
      {"batches", FlagKind::kValue, "micro-batches to evaluate; 0 = the whole split (default 0)",
       "N"},
      {"batch_size", FlagKind::kValue, "windows per batch (default: the run's micro batch)", "B"},
      {"kv_cache", FlagKind::kValue,
       "also evaluate teacher-forced through this KV cache policy, token by token (full, "
       "int8|int4[:group=G,residual=R], streaming:sinks=S,window=W, h2o:budget=B,recent=R, or "
       "SELECTION+STORAGE such as streaming:sinks=4,window=252+int8); reports it beside the "
       "plain loss with the cache bytes per token",
       "POLICY"},
      {"temporal_qa", FlagKind::kBool,
       "a temporal-encoder run: also answer the held-out questions and print the accuracy per "
       "attribute next to chance, the text-only and the shuffled-series baselines"},
      {"data.temporal.dir", FlagKind::kValue,
       "a temporal-encoder run: score these samples' validation split (default: the run's)", "DIR"},
      {"max_samples", FlagKind::kValue, "--temporal_qa: score the first N held-out samples", "N"},
      {"json", FlagKind::kValue,
       "--temporal_qa, --bpb, --tasks: also write the scores to this JSON file", "FILE"},
      {"bpb", FlagKind::kBool,
       "bits per byte (independent of the tokenizer) on the split's windows, or on --text"},
      {"text", FlagKind::kValue, "--bpb: score this raw text file instead of a token split",
       "FILE"},
      {"tasks", FlagKind::kValue,
       "CORE-style tasks in the DCLM eval bundle's format: a dir with core.yaml, "
       "eval_meta_data.csv and eval_data/, or a task-list YAML; prints accuracy and centered "
       "accuracy per task and the CORE mean",
       "DIR|FILE"},
      {"max_per_task", FlagKind::kValue,
       "--tasks, --chat_tasks: score the first N items of each (0 = all)", "N"},
      {"chat_tasks", FlagKind::kValue,
       "a chat model's tasks (a YAML list of multiple_choice / gsm8k JSONL files): accuracy "
       "per task, centered against chance, and ChatCORE",
       "FILE"},
      {"chat_format", FlagKind::kValue,
       "--chat_tasks: the model's chat format (auto: the chat.json of the data it was "
       "fine-tuned on, else nanochat's when its tokenizer has them)",
       "NAME"},
      {"threads", FlagKind::kValue, "intra-op threads (default: all cores)", "N"},
      {"device", FlagKind::kValue,
       "auto | cpu | cuda (default auto: a GPU when visible); fp32, without TF32", "D"},
      quiet_flag(),
  };
  const auto args = parse_args("eval", argv, flags, /*accept_config=*/false);
  apply_quiet(args);
  if (print_help_if_asked(
          args, flags,
          "Usage: lmtrain eval --checkpoint PATH [--split val|train] [--batches N]\n\n"
          "Prints the mean cross-entropy loss and perplexity of the checkpoint on\n"
          "non-overlapping windows of data.seq_len tokens. For a temporal-encoder run\n"
          "(model.temporal.enabled) it prints the answer loss on the held-out samples,\n"
          "and with --temporal_qa the question-answering accuracy per attribute.\n"
          "--bpb prints bits per byte instead; --tasks DIR scores CORE-style tasks,\n"
          "--chat_tasks FILE a chat model's (multiple choice by letter, GSM8K).\n\n")) {
    return 0;
  }
  if (!args.has("checkpoint")) throw UsageError("--checkpoint is required");
  const std::string split = args.get("split", "val");
  if (split != "val" && split != "train") throw UsageError("--split must be val or train");
  core::configure_threads(static_cast<int>(args.get_int("threads", 0, 0, kMaxThreadsFlag)), 1);

  // Launched on several ranks (torchrun, `lmtrain launch`): each rank on its own GPU.
  const auto rt = core::Runtime::for_device(args.get("device", "auto"), "--device",
                                            dist::discover_env().local_rank);
  rt.activate();
  if (args.get_bool("temporal_qa") || args.has("data.temporal.dir")) {
    // Decided from meta.json before any tensor is read, as `generate --series` does: an LM's
    // checkpoint has no encoder to answer with.
    const std::string spec = args.get("checkpoint");
    if (const auto temporal = is_temporal_checkpoint(spec); temporal && !*temporal) {
      throw UsageError(
          std::string(args.get_bool("temporal_qa") ? "--temporal_qa" : "--data.temporal.dir") +
          " needs a temporal-encoder run's checkpoint, and " + spec +
          " is not one (model.temporal.enabled is false): train one with "
          "--model.temporal.enabled=true, or leave the flag out to evaluate this "
          "LM on --data.dir");
    }
    return eval_temporal(args, rt);
  }
  auto loaded = train::load_inference_model(args.get("checkpoint"), rt);
  if (loaded.temporal) return eval_temporal(args, rt);
  const core::Config cfg = train::recorded_config(loaded.config_yaml, loaded.checkpoint_dir);
  // The ranks split the items (or windows) and sum their scores (eval_ranks.h).
  EvalRanks ranks = eval_ranks();
  const int asked = args.get_bool("bpb") + args.has("tasks") + args.has("chat_tasks");
  if (asked > 0) {
    if (!loaded.tokenizer) {
      throw UsageError("checkpoint " + loaded.checkpoint_dir + " has no tokenizer.json");
    }
    if (asked > 1) throw UsageError("--bpb, --tasks and --chat_tasks: one evaluation at a time");
    if (args.has("chat_tasks")) return eval_chat_tasks(args, loaded, ranks);
    return args.has("tasks") ? eval_tasks(args, loaded, cfg, ranks)
                             : eval_bpb(args, loaded, cfg, split, ranks);
  }
  if (args.has("text") || args.has("max_per_task") || args.has("chat_format")) {
    throw UsageError(args.has("text")           ? "--text goes with --bpb"
                     : args.has("max_per_task") ? "--max_per_task goes with --tasks or --chat_tasks"
                                                : "--chat_format goes with --chat_tasks");
  }
  const std::string data_dir =
      args.get("data_dir", args.get("data.dir", cfg.get_string("data.dir")));
  if (data_dir.empty()) {
    throw UsageError("checkpoint " + loaded.checkpoint_dir +
                     " records no data.dir (e.g. an `lmtrain import hf` checkpoint): give the "
                     "prepared data to evaluate on with --data.dir DIR (a dir `lmtrain prepare` "
                     "wrote with this checkpoint's tokenizer)");
  }
  auto shard = data::TokenSplit::open(data_dir, split);
  const std::string& path = shard.path();
  if (!loaded.tokenizer) {
    throw UsageError("checkpoint " + loaded.checkpoint_dir + " has no tokenizer.json");
  }
  if (shard.tokenizer_hash() != loaded.tokenizer->hash()) {
    throw UsageError(path + " was tokenized with a different tokenizer than the checkpoint's");
  }
  shard.set_vocab_size(loaded.tokenizer->vocab_size());
  const int64_t T = cfg.get_int("data.seq_len");
  data::WindowStream stream(shard, T, 0, false);
  const int64_t B = args.get_int("batch_size", cfg.get_int("train.micro_batch_size"));
  if (B < 1) throw UsageError("--batch_size must be >= 1");
  int64_t batches = args.get_int("batches", 0);
  if (batches <= 0) batches = std::max<int64_t>(1, stream.num_windows() / B);
  // The loss counts --batches per rank: on several ranks rank 0 alone scores (one rank's result).
  if (!ranks.lead()) return 0;
  auto group = dist::make_single_rank_group();
  double loss = 0;
  {
    core::Progress progress("eval", batches, "batches");
    loss = train::evaluate(*loaded.model, stream, B, batches, *group, rt, &progress);
  }
  std::cout << log::format(
      "checkpoint: %s (step %lld)\n%s loss: %.4f\nperplexity: %.3f\n"
      "windows: %lld x %lld tokens\n",
      loaded.checkpoint_dir.c_str(), (long long)loaded.step, split.c_str(), loss, std::exp(loss),
      (long long)(batches * B), (long long)T);
  if (args.has("kv_cache")) {
    const auto policy = infer::parse_kv_policy(args.get("kv_cache"));
    // Token by token through a cache: slow, so each has its own progress display.
    infer::CachedEval full, r;
    {
      core::Progress progress("eval: kv_cache full", batches, "batches");
      full = infer::evaluate_with_cache(*loaded.model, stream, B, batches, {}, &progress);
    }
    {
      core::Progress progress("eval: kv_cache " + policy.text, batches, "batches");
      r = infer::evaluate_with_cache(*loaded.model, stream, B, batches, policy, &progress);
    }
    std::cout << log::format(
        "kv_cache full: loss %.4f, perplexity %.3f, %.0f cache bytes/token\n"
        "kv_cache %s: loss %.4f, perplexity %.3f (%+.2f%% vs full), %.0f cache bytes/token\n",
        full.loss, std::exp(full.loss), full.cache_bytes_per_token, policy.text.c_str(), r.loss,
        std::exp(r.loss), 100 * (std::exp(r.loss) / std::exp(full.loss) - 1),
        r.cache_bytes_per_token);
  }
  return 0;
}

}  // namespace lmtrain::cli
