// `lmtrain lora merge --checkpoint DIR --output DIR`.
#include <iostream>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/error.h"
#include "interop/lora_export.h"

namespace lmtrain::cli {

int cmd_lora(const Args& argv) {
  const std::vector<FlagSpec> flags = {
      {"checkpoint", FlagKind::kValue, "a LoRA run's checkpoint dir, latest/best link or run dir",
       "PATH"},
      {"output", FlagKind::kValue, "run directory to write the merged checkpoint into", "RUN_DIR"},
      overwrite_flag(),
  };
  const auto args = parse_args("lora", argv, flags, /*accept_config=*/false);
  if (print_help_if_asked(
          args, flags,
          "Usage: lmtrain lora merge --checkpoint PATH --output RUN_DIR\n\n"
          "Folds a LoRA run's adapters into its base (W += alpha / rank * B A for every\n"
          "adapted layer; the base is read from the path and verified against the\n"
          "sha256 recorded in the checkpoint) and writes an ordinary checkpoint at\n"
          "RUN_DIR/checkpoints/latest (config lora.rank = 0): for generate, eval,\n"
          "`export hf` and `train --model.init_from=RUN_DIR`.\n\n")) {
    return 0;
  }
  if (args.positional.size() != 1 || args.positional[0] != "merge") {
    throw UsageError("usage: lmtrain lora merge --checkpoint PATH --output RUN_DIR");
  }
  if (!args.has("checkpoint")) throw UsageError("lora merge: --checkpoint PATH is required");
  if (!args.has("output")) throw UsageError("lora merge: --output RUN_DIR is required");
  const auto dir =
      train::merge_lora(args.get("checkpoint"), args.get("output"), args.get_bool("overwrite"));
  std::cout << "merged " << args.get("checkpoint") << "\ncheckpoint: " << dir << "\n";
  return 0;
}

}  // namespace lmtrain::cli
