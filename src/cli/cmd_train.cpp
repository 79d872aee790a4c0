#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "checkpoint/checkpoint_copy.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/dist_setup.h"
#include "cli/launcher_flags.h"
#include "cli/model_presets.h"
#include "cli/read_options.h"
#include "cli/run_config.h"
#include "cli/run_config_snapshot.h"
#include "cli/teacher_run.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "core/stop_signal.h"
#include "train/recorded_run.h"
#include "train/trainer.h"

namespace lmtrain::cli {
namespace {

// --model_type (the PiKV trainer), --model_size (the Qwen3 trainer) and --model (the
// distillation trainer) pick a preset in configs/, merged before --config.
std::string preset_from_flags(const ParsedArgs& args) {
  int given = 0;
  std::string names;
  for (const char* flag : {"model_type", "model_size", "model"}) {
    if (!args.has(flag)) continue;
    ++given;
    names += std::string(names.empty() ? "" : " and ") + "--" + flag + "=" + args.get(flag);
  }
  if (given > 1) throw UsageError(names + " all pick a model preset: give one of them");
  std::string file;
  if (args.has("model")) {
    // The seed's --model gpt2 is Hugging Face's GPT-2 (124M): configs/gpt2-124m.yaml.
    const std::string name = args.get("model");
    file = (name == "gpt2" ? std::string("gpt2-124m") : name) + ".yaml";
    const std::string dir = find_configs_dir();
    if (dir.empty() || !std::filesystem::exists(dir + "/" + file)) {
      throw UsageError("--model='" + name + "': no preset " + file + " in " +
                       (dir.empty() ? std::string("configs/") : dir) +
                       " (see `lmtrain train --help-models`)");
    }
  } else if (args.has("model_type")) {
    const std::string type = args.get("model_type");
    if (type == "pikv") file = "moe-tiny.yaml";
    if (type == "standard") file = "moe-tiny-dense.yaml";
    if (file.empty()) {
      throw UsageError("--model_type='" + type + "': expected pikv (MoE) or standard (dense)");
    }
  } else if (args.has("model_size")) {
    const std::string size = args.get("model_size");
    for (const char* known : {"tiny", "small", "medium", "large"}) {
      if (size == known) file = "qwen3-" + size + ".yaml";
    }
    if (file.empty()) {
      throw UsageError("--model_size='" + size +
                       "': expected tiny, small, medium or large (the presets "
                       "configs/qwen3-<size>.yaml)");
    }
  } else {
    return "";
  }
  const std::string dir = find_configs_dir();
  if (dir.empty()) throw UsageError("--model_type/--model_size: no configs/ directory found");
  return dir + "/" + file;
}

// "  --epochs                    train.epochs" for each flat alias, for --help.
std::string aliases_help() {
  std::string out;
  for (const auto& [alias, target] : core::config_aliases()) {
    std::string left = "  --" + alias;
    left.resize(std::max<size_t>(left.size() + 1, 30), ' ');
    out += left + target + "\n";
  }
  return out;
}

// `train --nproc_per_node=N ...`: this process becomes the launcher of N `train` ranks.
int spawn_ranks(const Args& argv, const std::string& nproc) {
  if (std::getenv("RANK") || std::getenv("OMPI_COMM_WORLD_RANK")) {
    throw UsageError(
        "--nproc_per_node starts the ranks itself: leave it out when running under a launcher "
        "(RANK is set)");
  }
  Args launch = {"--standalone", "--nproc_per_node=" + nproc, "--", "train"};
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "--nproc_per_node" || a == "--nproc-per-node") {
      ++i;  // its value
    } else if (a.rfind("--nproc_per_node=", 0) != 0 && a.rfind("--nproc-per-node=", 0) != 0 &&
               a != "--use_spawn" && a != "--use-spawn") {
      launch.push_back(a);
    }
  }
  return cmd_launch(launch);
}

}  // namespace

int cmd_train(const Args& argv) {
  // `lmtrain train ... | head -3`: the run goes on when its console goes away (train.log keeps
  // everything).
  core::ignore_broken_pipes();
  auto flags = config_flags();
  flags.push_back(
      {"help-models", FlagKind::kBool, "list the presets in configs/ with their parameter counts"});
  flags.push_back({"nproc_per_node", FlagKind::kValue,
                   "start N ranks of this job on this node (like mp.spawn): the same as "
                   "`lmtrain launch --standalone --nproc_per_node=N -- train ...`",
                   "N"});
  flags.push_back({"use_spawn", FlagKind::kBool,
                   "accepted for the seeds' command lines: ranks are processes either way"});
  flags.push_back({"model_type", FlagKind::kValue,
                   "pikv: the MoE preset configs/moe-tiny.yaml; standard: its dense twin "
                   "configs/moe-tiny-dense.yaml (merged before --config)",
                   "NAME"});
  flags.push_back({"overwrite", FlagKind::kBool,
                   "start fresh in a run.dir that holds an earlier run's checkpoints, moving "
                   "that run into RUN_DIR/previous-<n>/ (never deleted); with a resume from an "
                   "earlier checkpoint, move the later checkpoints it would replace aside into "
                   "RUN_DIR/previous-<n>/checkpoints/"});
  flags.push_back({"model_size", FlagKind::kValue,
                   "tiny|small|medium|large: the preset configs/qwen3-<size>.yaml (the Qwen3 "
                   "trainer's sizes; merged before --config)",
                   "SIZE"});
  flags.push_back({"model", FlagKind::kValue,
                   "a preset in configs/ by name (gpt2 = gpt2-124m, HF's GPT-2 shape; merged "
                   "before --config)",
                   "NAME"});
  flags.push_back({"use_distillation", FlagKind::kBool,
                   "distill the model from a teacher (distill.enabled=true; see distill.*)"});
  flags.push_back({"save_checkpoint", FlagKind::kValue,
                   "also copy the final checkpoint to PATH when training ends (resume from it "
                   "with --load_checkpoint PATH)",
                   "PATH"});
  for (auto& f : launcher_flags()) flags.push_back(std::move(f));
  const auto args = parse_args("train", argv, flags, /*accept_config=*/true);
  if (print_help_if_asked(
          args, flags,
          "Usage: lmtrain train [--config FILE] [--section.key=VALUE ...]\n\n"
          "Trains a model. Writes RUN_DIR/{config.yaml, train.log, metrics.jsonl,\n"
          "events.out.tfevents.*, checkpoints/}. Ctrl-C saves a checkpoint and stops\n"
          "(exit code 128+signal: 130, or 143 for SIGTERM); --resume=auto continues from the\n"
          "latest checkpoint. One job at a time per run dir (RUN_DIR/.lock); a fresh run into a\n"
          "run dir with checkpoints is refused unless --resume=auto or --overwrite.\n\n"
          "Distributed: run under `lmtrain launch`, torchrun, mpirun or srun; the rank comes\n"
          "from the environment (RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, OMPI_COMM_WORLD_*,\n"
          "SLURM_*). Each rank logs to RUN_DIR/train.rankN.log; rank 0 writes the rest.\n\n"
          "Devices and precision: --train.device=auto|cpu|cuda (auto: a GPU when visible;\n"
          "rank r uses cuda:LOCAL_RANK), --train.precision=fp32|bf16|fp16 (16-bit compute,\n"
          "fp32 master weights; fp16 adds dynamic loss scaling and needs CUDA; bf16 on a CPU\n"
          "is correct but slow), --train.activation_checkpointing=none|block|every:K.\n\n"
          "Flat aliases (the flags of nanochat, the Qwen3 trainer, the temporal-encoder and\n"
          "PiKV trainers; README \"Coming from ...\"), each setting one config key:\n" +
              aliases_help() + "\n")) {
    return 0;
  }
  if (args.has("help-models")) {
    const std::string dir = find_configs_dir();
    if (dir.empty()) throw UsageError("--help-models: no configs/ directory found");
    std::cout << "Presets in " << dir << "/ (parameters counted from the built model):\n"
              << describe_presets(dir);
    return 0;
  }
  if (!args.positional.empty()) {
    throw UsageError("unexpected argument '" + args.positional[0] + "' for `lmtrain train`");
  }
  if (args.has("nproc_per_node")) return spawn_ranks(argv, args.get("nproc_per_node"));
  const auto environment = environment_with_launcher_flags(args);
  auto config = load_run_config(args, preset_from_flags(args));
  if (args.get_bool("use_distillation")) {
    config.set("distill.enabled", "true", "--use_distillation");
  }
  auto dist = setup_distributed(config, environment);
  if (dist.env.restart_count > 0 && config.get_string("checkpoint.resume").empty()) {
    // Restarted by `lmtrain launch --max_restarts` or torchrun: carry on from `latest`.
    config.set("checkpoint.resume", "auto", "restart by the launcher");
    log::info(log::format("restart %d of this job: resuming from the latest checkpoint",
                          dist.env.restart_count));
  }
  const bool overwrite = args.get_bool("overwrite");
  // The student's run dir is claimed first: a teacher trained first lives inside it.
  const auto options = read_run_options(config, dist.group->size(), dist.runtime);
  auto setup = read_setup_options(config);
  const auto run =
      train::start_run(options, *dist.group, dist.runtime, dist.env.local_world_size, overwrite);
  if (const auto teacher = teacher_training_run(config)) {
    // An ordinary run of its own in RUN_DIR/teacher: a rerun resumes it or finds it complete.
    const auto teacher_options = read_run_options(*teacher, dist.group->size(), dist.runtime);
    const auto teacher_setup = read_setup_options(*teacher);
    const auto teacher_run =
        train::start_run(teacher_options, *dist.group, dist.runtime, dist.env.local_world_size);
    RunConfigSnapshot teacher_snapshot(*teacher);
    const auto trained = train::run_training_recorded(
        teacher_options, teacher_setup, teacher_snapshot, *dist.group, dist.runtime, teacher_run);
    if (trained.stop_signal) {
      log::warn("stopped while training the teacher: rerun the command to continue");
      return 128 + trained.stop_signal;
    }
    config.set("distill.teacher", teacher_options.run_dir, "the teacher trained first");
    setup.distill = read_distill_options(config);
  }
  RunConfigSnapshot snapshot(config);
  const auto result =
      train::run_training_recorded(options, setup, snapshot, *dist.group, dist.runtime, run);
  if (args.has("save_checkpoint") && !result.stop_signal && !result.last_checkpoint.empty()) {
    train::export_checkpoint_copy(result.last_checkpoint, args.get("save_checkpoint"));
    log::info("copied " + result.last_checkpoint + " to " + args.get("save_checkpoint"));
  }
  // Stopped by SIGINT/SIGTERM (checkpoint saved): 128+signal, as a shell, torchrun and Slurm
  // report it, so that a scheduler can tell an interrupted run from a finished one.
  return result.stop_signal ? 128 + result.stop_signal : 0;
}

}  // namespace lmtrain::cli
