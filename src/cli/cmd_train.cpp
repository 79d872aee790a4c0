#include <iostream>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/run_config.h"
#include "core/error.h"
#include "dist/group.h"
#include "train/trainer.h"

namespace lmtrain::cli {

int cmd_train(const Args& argv) {
  auto flags = config_flags();
  const auto args = parse_args("train", argv, flags, /*accept_config=*/true);
  if (args.help) {
    std::cout << "Usage: lmtrain train [--config FILE] [--section.key=VALUE ...]\n\n"
                 "Trains a model. Writes RUN_DIR/{config.yaml, train.log, metrics.jsonl,\n"
                 "events.out.tfevents.*, checkpoints/}. Ctrl-C saves a checkpoint and stops;\n"
                 "--resume=auto continues from the latest checkpoint.\n\nFlags:\n"
              << flags_help(flags)
              << "  --section.key=VALUE         override any config key (see --help-config)\n"
                 "  --epochs --max_steps --save_every --batch_size --lr --resume --output_dir\n"
                 "  --seed --data_dir           flat aliases of config keys\n";
    return 0;
  }
  if (args.has("help-config")) {
    std::cout << core::config_reference();
    return 0;
  }
  if (!args.positional.empty()) {
    throw UsageError("unexpected argument '" + args.positional[0] + "' for `lmtrain train`");
  }
  auto config = load_run_config(args);
  auto group = dist::make_single_rank_group();
  train::run_training(config, *group, 1);
  return 0;
}

}  // namespace lmtrain::cli
