// A run dir that a command other than `train` makes, holding one checkpoint: `import hf` (the
// converted model) and `lora merge` (the merged one). Written through core::OutputDir, so it
// never replaces an input, a locked run or (without --overwrite) anything already there, and
// appears complete or not at all.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "train/checkpoint_store.h"

namespace lmtrain::core {
class OutputDir;
}

namespace lmtrain::train {

// Writes checkpoints/step_N (+ latest) and config.yaml into out.staging(), commits `out` and
// returns the checkpoint's final directory (under out.path()).
std::string write_one_checkpoint_run(core::OutputDir& out, int64_t step,
                                     const CheckpointFiles& files, nlohmann::json meta,
                                     const std::string& config_yaml);

}  // namespace lmtrain::train
