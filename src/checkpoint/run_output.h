// A run dir that a command other than `train` makes, holding one checkpoint: `import hf` (the
// converted model) and `lora merge` (the merged one). Written through core::OutputDir, so it
// never replaces an input, a locked run or (without --overwrite) anything already there, and
// appears complete or not at all.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "checkpoint/checkpoint_store.h"

namespace lmtrain::core {
class Config;
class OutputDir;
}  // namespace lmtrain::core

namespace lmtrain::train {

// The config.yaml of such a run, made ready to fine-tune from it as the README shows
// (`lmtrain train --config RUN/config.yaml --data.dir=...`): model.init_from = RUN (its
// checkpoint), run.dir = RUN-finetune (never RUN itself, which holds the checkpoint to start from)
// and, when neither is set, train.epochs = 1 (one pass over the data).
void set_finetune_defaults(core::Config& cfg, const std::string& run_dir,
                           const std::string& origin);

// Writes checkpoints/step_N (+ latest) and config.yaml into out.staging(), commits `out` and
// returns the checkpoint's final directory (under out.path()).
std::string write_one_checkpoint_run(core::OutputDir& out, int64_t step,
                                     const CheckpointFiles& files, nlohmann::json meta,
                                     const std::string& config_yaml);

}  // namespace lmtrain::train
