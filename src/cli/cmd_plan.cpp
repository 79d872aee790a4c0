// `lmtrain plan`: bytes per rank by kind and bytes sent per step for a config at N ranks, before
// any memory is spent (train/memory_plan.h, train/traffic_plan.h); with --device_memory, the
// largest micro-batch that fits and which layouts fit at all (train/plan_layouts.h).
#include <torch/cuda.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/read_options.h"
#include "cli/run_config.h"
#include "core/error.h"
#include "core/log.h"
#include "data/bpe_tokenizer.h"
#include "options/read_model.h"
#include "parallel/fully_shard.h"
#include "train/plan_layouts.h"

namespace lmtrain::cli {

int cmd_plan(const Args& argv) {
  auto flags = config_flags();
  flags.push_back({"nproc", FlagKind::kValue, "ranks of the job (default 1)", "N"});
  flags.push_back({"tp", FlagKind::kValue, "tensor-parallel ranks among them (default 1)", "T"});
  flags.push_back({"device_memory", FlagKind::kValue,
                   "memory per rank in GiB (2^30 bytes): print the largest micro-batch that "
                   "fits and a table of the layouts that fit at micro-batch 1",
                   "GIB"});
  const auto args = parse_args("plan", argv, flags, /*accept_config=*/true);
  if (print_help_if_asked(
          args, flags,
          "Usage: lmtrain plan --config FILE --nproc N [--tp T] [--device_memory GIB]\n"
          "                    [--section.key=VALUE ...]\n\n"
          "Prints what each of N ranks will hold, in bytes, before any device memory is spent\n"
          "(host only, weights never written): parameters (whole, or ZeRO-3's shard),\n"
          "gradients, optimizer state, their sum model_state_bytes_per_rank (the figure a run\n"
          "logs), ZeRO-3's gathered peak (root unit + two blocks), an estimate of one\n"
          "micro-batch's activations, and the bytes a rank sends per step by collective kind.\n"
          "The layout is dist.zero, dist.shard_group_size, dist.ep and --tp. With\n"
          "--device_memory: the largest micro-batch whose peak fits, and a table of every\n"
          "layout at N ranks (ZeRO-0..3, HSDP groups, TP and EP degrees, each with HSDP)\n"
          "at micro-batch 1.\n"
          "The activation estimate counts what grows with the micro-batch (train/\n"
          "activation_estimate.h), not the CUDA context, libraries or allocator slack.\n"
          "model.vocab_size 0 takes the vocabulary of data.dir's tokenizer.json.\n\n")) {
    return 0;
  }
  if (!args.positional.empty()) {
    throw UsageError("unexpected argument '" + args.positional[0] + "' for `lmtrain plan`");
  }
  const int nproc = static_cast<int>(args.get_int("nproc", 1, 1, 1 << 20));
  const int tp = static_cast<int>(args.get_int("tp", 1, 1, 1 << 20));
  const double device_gib = args.get_float("device_memory", 0);
  if (args.has("device_memory") && !(device_gib > 0 && std::isfinite(device_gib))) {
    throw UsageError("--device_memory must be a positive number of GiB");
  }
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
  const auto optimizer = read_optimizer_options(config);
  if (optimizer.name != optim::OptimizerName::kAdamW) {
    throw UsageError("lmtrain plan: only optim.name=adamw is planned (its state is two moments)");
  }
  if (nproc % tp != 0) {
    throw UsageError(log::format("lmtrain plan: --tp %d must divide --nproc %d", tp, nproc));
  }
  train::PlanLayout layout;
  layout.nproc = nproc;
  layout.tp = tp;
  layout.ep = static_cast<int>(config.get_int("dist.ep"));
  layout.zero = optimizer.zero;
  layout.shard_group_size = optimizer.shard_group_size;
  layout.reshard_after_forward = optimizer.reshard_after_forward;
  const auto batch = read_batch_plan(config, nproc / tp);
  // The attention kernel: the CPU's keeps its probabilities, FlashAttention on a GPU does not.
  const std::string device = config.get_string("train.device");
  const bool cpu = device == "cpu" || (device == "auto" && !torch::cuda::is_available());
  train::ActivationShape act;
  act.seq_len = batch.seq_len;
  act.compute_bytes = config.get_string("train.precision") == "fp32" ? 4 : 2;
  act.attention_probs = cpu;
  train::TrafficInputs traffic;
  traffic.micro_batch = batch.micro_batch;
  traffic.accum_steps = batch.accum_steps;
  traffic.seq_len = batch.seq_len;
  traffic.compute_bytes = act.compute_bytes;
  traffic.grad_reduce_bytes = config.get_string("train.grad_reduce_dtype") == "bf16" ? 2 : 4;
  traffic.bf16_gathers =
      parallel::gather_dtype_for(core::get_choice<core::Precision>(config), tp > 1).has_value();

  const auto census = train::take_census(model);
  const auto plan = train::plan_memory(census, model, layout, act, batch.micro_batch);
  std::cout << train::describe(plan)
            << "attention_probabilities_kept: " << (cpu ? "yes (cpu)" : "no (cuda)") << "\n"
            << train::describe_traffic(train::plan_traffic(plan, model, traffic));
  if (device_gib > 0) {
    const auto device_bytes = static_cast<int64_t>(device_gib * 1073741824.0);
    std::cout << "largest_micro_batch: " << plan.largest_micro_batch(device_bytes) << "\n\n"
              << train::layout_table(census, model,
                                     train::candidate_layouts(model, nproc, batch.seq_len), act,
                                     traffic, device_bytes);
  }
  return 0;
}

}  // namespace lmtrain::cli
