// `lmtrain distill-cache`: writes the offline teacher of a distillation run (the teacher's top-k
// logits at every position of every training window; distill/teacher_cache.h).
#include <chrono>
#include <filesystem>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/dist_setup.h"
#include "cli/read_options.h"
#include "cli/run_config.h"
#include "core/error.h"
#include "core/log.h"
#include "core/output_dir.h"
#include "core/runtime.h"
#include "core/stop_signal.h"
#include "core/threads.h"
#include "data/bpe_tokenizer.h"
#include "data/prepared_data.h"
#include "data/token_split.h"
#include "data/window_stream.h"
#include "distill/teacher.h"
#include "distill/teacher_cache.h"
#include "model/gpt_config.h"
#include "options/read_model.h"

namespace lmtrain::cli {

int cmd_distill_cache(const Args& argv) {
  auto flags = config_flags();
  flags.push_back({"output", FlagKind::kValue, "the cache file to write (required)", "FILE"});
  flags.push_back(
      {"top_k", FlagKind::kValue, "logits kept per token, the largest (default 16)", "K"});
  flags.push_back(
      {"batch_size", FlagKind::kValue, "windows per teacher forward (default 16)", "N"});
  flags.push_back({"overwrite", FlagKind::kBool,
                   "replace an existing --output file (once the new one is complete)"});
  flags.push_back(quiet_flag());
  const auto args = parse_args("distill-cache", argv, flags, /*accept_config=*/true);
  if (print_help_if_asked(
          args, flags,
          "Usage: lmtrain distill-cache --config FILE --distill.teacher=CKPT --output FILE\n"
          "       [--top_k K] [--section.key=VALUE ...]\n\n"
          "Runs the teacher once over every training window of data.dir (windows of\n"
          "data.seq_len tokens) and writes its top-k logits and their token ids per position.\n"
          "Train the student with the same config plus --distill.enabled=true\n"
          "--distill.cache=FILE: the teacher is then read instead of run, the loss taken on\n"
          "its top-k plus the rest of its distribution (the log-sum-exp at distill.temperature\n"
          "is stored: train at the same temperature), and any order, world size or resume\n"
          "reads the rows of the windows it trains on. The file is written atomically; a\n"
          "cache made for other data, another tokenizer, seq_len or temperature is refused\n"
          "when training starts. An existing FILE is refused unless --overwrite; SIGINT or\n"
          "SIGTERM stops it with nothing written (exit code 128+signal).\n\n")) {
    return 0;
  }
  apply_quiet(args);
  if (!args.positional.empty()) {
    throw UsageError("unexpected argument '" + args.positional[0] +
                     "' for `lmtrain distill-cache`");
  }
  if (!args.has("output")) throw UsageError("--output FILE is required");
  const int64_t top_k = args.get_int("top_k", 16, 1);
  const int64_t batch = args.get_int("batch_size", 16, 1);
  auto cfg = load_run_config(args);
  if (cfg.get_string("distill.teacher").empty()) {
    throw UsageError("distill-cache needs the teacher: --distill.teacher=CHECKPOINT");
  }
  const std::string output = args.get("output");
  const std::string data_dir = cfg.get_string("data.dir");
  // Before the teacher pass, not after it: a refusal costs nothing.
  std::vector<std::string> inputs = {data_dir + "/tokenizer.json",
                                     cfg.get_string("distill.teacher")};
  if (!data_dir.empty()) {
    for (const char* split : {"train", "val"}) {
      for (auto& p : data::split_piece_paths(data_dir, split)) inputs.push_back(std::move(p));
    }
  }
  core::check_output_file(output, {"distill-cache", inputs, args.get_bool("overwrite")});
  core::install_stop_handlers();
  core::configure_threads(static_cast<int>(cfg.get_int("train.threads")), 1);
  const auto rt = read_runtime(cfg, 0);
  rt.activate();

  const auto tokenizer =
      data::BpeTokenizer::load_hf(data::require_data_file(data_dir, "tokenizer.json"));
  auto shard = data::TokenSplit::open(data_dir, "train");
  data::check_shard_hash(shard, tokenizer.hash());
  shard.set_vocab_size(tokenizer.vocab_size());
  const auto student = options::read_gpt_config(cfg, static_cast<int64_t>(tokenizer.vocab_size()));
  data::WindowStream stream(shard, cfg.get_int("data.seq_len"), 0, /*shuffle=*/false);

  auto teacher = train::load_teacher(read_distill_options(cfg), cfg.get_int("data.seq_len"), rt,
                                     student.vocab_size, tokenizer.hash());
  train::TeacherCacheInfo info;
  info.top_k = top_k;
  info.temperature = cfg.get_float("distill.temperature");
  info.train_tokens = static_cast<int64_t>(shard.size());
  info.tokenizer_hash = tokenizer.hash();
  info.teacher = teacher.dir;
  info.teacher_sha256 = teacher.sha256;
  const auto t0 = std::chrono::steady_clock::now();
  log::info(log::format("distill-cache: top-%lld logits of %lld windows of %lld tokens -> %s",
                        (long long)top_k, (long long)stream.num_windows(),
                        (long long)stream.seq_len(), output.c_str()));
  if (!train::write_teacher_cache(output, *teacher.model, stream, info, batch, rt)) {
    log::warn("distill-cache: stopped by signal " + std::to_string(core::stop_signal()) +
              " before the end: nothing written (" + output + " is as it was)");
    return 128 + core::stop_signal();
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto bytes = static_cast<double>(std::filesystem::file_size(output));
  log::info(log::format("wrote %s: %.1f MiB, %.1f s (%.0f tokens/s)", output.c_str(),
                        bytes / 1048576.0, secs, stream.num_windows() * stream.seq_len() / secs));
  return 0;
}

}  // namespace lmtrain::cli
