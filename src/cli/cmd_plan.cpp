// `lmtrain plan`: bytes per rank by kind for a config at N ranks, before any memory is spent
// (train/memory_plan.h).
#include <algorithm>
#include <filesystem>
#include <iostream>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/read_options.h"
#include "cli/run_config.h"
#include "core/error.h"
#include "data/bpe_tokenizer.h"
#include "options/read_model.h"
#include "train/memory_plan.h"

namespace lmtrain::cli {

int cmd_plan(const Args& argv) {
  auto flags = config_flags();
  flags.push_back({"nproc", FlagKind::kValue, "ranks of the job (default 1)", "N"});
  flags.push_back({"tp", FlagKind::kValue, "tensor-parallel ranks among them (default 1)", "T"});
  const auto args = parse_args("plan", argv, flags, /*accept_config=*/true);
  if (print_help_if_asked(
          args, flags,
          "Usage: lmtrain plan --config FILE --nproc N [--tp T] [--section.key=VALUE ...]\n\n"
          "Prints what each of N ranks will hold, in bytes, before any device memory is spent\n"
          "(host only): parameters (whole, or ZeRO-3's shard), gradients, optimizer state, their\n"
          "sum model_state_bytes_per_rank (the figure a run logs), ZeRO-3's gathered peak\n"
          "(root unit + two blocks), and an estimate of one micro-batch's activations.\n"
          "model.vocab_size 0 takes the vocabulary of data.dir's tokenizer.json.\n\n")) {
    return 0;
  }
  if (!args.positional.empty()) {
    throw UsageError("unexpected argument '" + args.positional[0] + "' for `lmtrain plan`");
  }
  const int nproc = static_cast<int>(args.get_int("nproc", 1, 1, 1 << 20));
  const int tp = static_cast<int>(args.get_int("tp", 1, 1, 1 << 20));
  const auto config = load_run_config(args);
  int64_t vocab = 0;
  if (config.get_int("model.vocab_size") == 0) {
    const std::string tok = config.get_string("data.dir") + "/tokenizer.json";
    if (!std::filesystem::exists(tok)) {
      throw UsageError("lmtrain plan: model.vocab_size is 0 and " + tok +
                       " does not exist: give --model.vocab_size");
    }
    vocab = static_cast<int64_t>(data::BpeTokenizer::load_hf(tok).vocab_size());
  }
  const auto model = options::read_model_options(config, vocab);
  const std::string precision = config.get_string("train.precision");
  const int64_t compute_bytes = precision == "fp32" ? 4 : 2;
  const auto plan = train::plan_memory(model, read_optimizer_options(config),
                                       read_batch_plan(config, nproc / std::max(tp, 1)), nproc, tp,
                                       compute_bytes);
  std::cout << train::describe(plan);
  return 0;
}

}  // namespace lmtrain::cli
