// `lmtrain temporal-data`: generates and caches synthetic time-series QA samples for the
// temporal-encoder pretrainer (issue 26; data/temporal/temporal_cache.h).
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/log.h"
#include "core/progress.h"
#include "data/temporal/generation_progress.h"
#include "data/temporal/generator.h"
#include "data/temporal/temporal_cache.h"

namespace lmtrain::cli {
namespace {

// Generation through the progress display (core/progress.h: redrawn on a terminal, plain lines
// to a file or pipe, nothing with --quiet).
data::temporal::ProgressCallback temporal_progress_display() {
  auto display = std::make_shared<std::unique_ptr<core::Progress>>();
  return [display](const data::temporal::GenerationProgress& p) {
    if (!*display) *display = std::make_unique<core::Progress>("temporal-data", p.total, "samples");
    (*display)->set(p.done);
    if (p.done >= p.total) display->reset();  // its "done:" line
  };
}

}  // namespace

int cmd_temporal_data(const Args& argv) {
  std::string task_list;
  for (const auto& t : data::temporal::temporal_tasks())
    task_list += (task_list.empty() ? "" : ", ") + t;
  const std::vector<FlagSpec> flags = {
      {"num_samples", FlagKind::kValue, "samples to generate (required)", "N"},
      {"output_dir", FlagKind::kValue, "directory to write (required)", "DIR"},
      {"seed", FlagKind::kValue, "generator seed (default 0)", "S"},
      {"length", FlagKind::kMulti,
       "series length(s) in [32, 1048576]; each sample draws one (default 256)", "L"},
      {"channels", FlagKind::kValue, "channels per series, 1 to 64 (default 1)", "C"},
      {"tasks", FlagKind::kMulti, "the tasks to cycle through (default all: " + task_list + ")",
       "TASK"},
      {"shard_size", FlagKind::kValue, "samples per train_NNNNN.jsonl file (default 10000)", "N"},
      {"threads", FlagKind::kValue,
       "generation threads (0 = all cores; the bytes do not depend "
       "on it)",
       "N"},
      {"lm_text", FlagKind::kBool,
       "also write DIR/lm_text.jsonl: each sample as text (at the series' place its statistics "
       "and its attributes in words, e.g. 'increasing periodic one'; then the question and the "
       "answer), the warm-up corpus of a small LM that learns to read a description in context "
       "(`lmtrain prepare --input DIR/lm_text.jsonl`)"},
      overwrite_flag(),
      quiet_flag(),
  };
  const auto args = parse_args("temporal-data", argv, flags, /*accept_config=*/false);
  if (print_help_if_asked(
          args, flags,
          "Usage: lmtrain temporal-data --num_samples N --output_dir DIR [--seed S]\n"
          "       [--length L ...] [--channels C] [--shard_size N] [--lm_text] [--overwrite]\n\n"
          "Generates synthetic time-series question/answer samples for aligning a temporal\n"
          "encoder to a frozen LM (data.temporal.*), deterministically: sample i depends only\n"
          "on (seed, i, lengths, channels, tasks), never on --threads, and equals the one\n"
          "online generation makes. Each curve is built from a trend (increasing, decreasing,\n"
          "flat), seasonality (a period or none), noise (low, high), spikes (none, one,\n"
          "several), a level shift (yes, no) and a scale and offset; each sample asks about one\n"
          "of them (task i % tasks, class (i / tasks) % classes: any block of samples is\n"
          "class-balanced), or for the period, the spike's position, or a caption.\n\n"
          "Writes DIR/train_00000.jsonl, ... in ChatTS's JSONL format\n"
          "  {\"input\": \"<ts><ts/>\\nWhat is the trend of this series? Options: "
          "...\\nAnswer:\",\n"
          "   \"output\": \" increasing\", \"timeseries\": [[v0, v1, ...]], \"task\": ...,\n"
          "   \"choices\": [...], \"answer\": ..., \"numeric_answer\": ..., \"attributes\": "
          "{...}}\n"
          "(a series of C > 1 channels is [[channel 0], [channel 1], ...]; null = missing) and\n"
          "DIR/temporal_data.json (the options, and each shard's samples and sha256). An\n"
          "existing DIR that holds files is refused unless --overwrite (moved aside, never\n"
          "deleted); nothing appears in DIR until every file is written.\n\n")) {
    return 0;
  }
  apply_quiet(args);
  if (!args.positional.empty()) {
    throw UsageError("unexpected argument '" + args.positional[0] +
                     "' for `lmtrain temporal-data`");
  }
  if (!args.has("num_samples")) throw UsageError("temporal-data: --num_samples N is required");
  if (!args.has("output_dir")) throw UsageError("temporal-data: --output_dir DIR is required");
  data::temporal::TemporalDataOptions o;
  o.output_dir = args.get("output_dir");
  o.num_samples = args.get_int("num_samples", 0, 1, int64_t{1} << 40);
  o.shard_size = args.get_int("shard_size", 10000, 1, int64_t{1} << 40);
  o.threads = static_cast<int>(args.get_int("threads", 0, 0, kMaxThreadsFlag));
  o.overwrite = args.get_bool("overwrite");
  o.lm_text = args.get_bool("lm_text");
  o.generator.seed = static_cast<uint64_t>(args.get_int("seed", 0, 0));
  o.generator.channels = args.get_int("channels", 1, 1, 64);
  if (args.has("length")) {
    o.generator.lengths.clear();
    for (const std::string& v : args.get_all("length")) {
      ParsedArgs one;
      one.flags["length"] = {v};
      o.generator.lengths.push_back(one.get_int("length", 0, 32, int64_t{1} << 20));
    }
  }
  o.generator.tasks = args.get_all("tasks");
  const auto s = data::temporal::write_temporal_data(o, temporal_progress_display());
  // No rate for a run too short to time (core::rate_measurable).
  const std::string rate =
      core::rate_measurable(s.seconds)
          ? log::format("%.0f samples/s, ", static_cast<double>(s.manifest.num_samples) / s.seconds)
          : "";
  std::cout << log::format(
      "temporal-data: wrote %lld samples in %zu shard(s), %.1f MB, to %s in %.1f s "
      "(%s%d thread(s), seed %llu)\n",
      static_cast<long long>(s.manifest.num_samples), s.manifest.shards.size(),
      static_cast<double>(s.bytes) / 1e6, o.output_dir.c_str(), s.seconds, rate.c_str(), s.threads,
      static_cast<unsigned long long>(o.generator.seed));
  return 0;
}

}  // namespace lmtrain::cli
