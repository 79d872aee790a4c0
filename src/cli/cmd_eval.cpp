#include <cmath>
#include <iostream>

#include "checkpoint/checkpoint_model.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/log.h"
#include "core/threads.h"
#include "data/prepared_data.h"
#include "data/token_split.h"
#include "data/window_stream.h"
#include "distributed/group.h"
#include "infer/cached_eval.h"
#include "train/evaluator.h"

namespace lmtrain::cli {

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
      {"threads", FlagKind::kValue, "intra-op threads (default: all cores)", "N"},
      {"device", FlagKind::kValue,
       "auto | cpu | cuda (default auto: a GPU when visible); fp32, without TF32", "D"},
  };
  const auto args = parse_args("eval", argv, flags, /*accept_config=*/false);
  if (args.help) {
    std::cout << "Usage: lmtrain eval --checkpoint PATH [--split val|train] [--batches N]\n\n"
                 "Prints the mean cross-entropy loss and perplexity of the checkpoint on\n"
                 "non-overlapping windows of data.seq_len tokens.\n\nFlags:\n"
              << flags_help(flags);
    return 0;
  }
  if (!args.has("checkpoint")) throw UsageError("--checkpoint is required");
  const std::string split = args.get("split", "val");
  if (split != "val" && split != "train") throw UsageError("--split must be val or train");
  core::configure_threads(static_cast<int>(args.get_int("threads", 0, 0, kMaxThreadsFlag)), 1);

  const auto rt = core::Runtime::for_device(args.get("device", "auto"), "--device");
  rt.activate();
  auto loaded = train::load_inference_model(args.get("checkpoint"), rt);
  const auto& cfg = *loaded.config;
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
  auto group = dist::make_single_rank_group();
  const double loss = train::evaluate(*loaded.model, stream, B, batches, *group, rt);
  std::cout << log::format(
      "checkpoint: %s (step %lld)\n%s loss: %.4f\nperplexity: %.3f\n"
      "windows: %lld x %lld tokens\n",
      loaded.checkpoint_dir.c_str(), (long long)loaded.step, split.c_str(), loss, std::exp(loss),
      (long long)(batches * B), (long long)T);
  if (args.has("kv_cache")) {
    const auto policy = infer::parse_kv_policy(args.get("kv_cache"));
    const auto full = infer::evaluate_with_cache(*loaded.model, stream, B, batches, {});
    const auto r = infer::evaluate_with_cache(*loaded.model, stream, B, batches, policy);
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
