#include "checkpoint/checkpoint_config.h"

#include "checkpoint/training_checkpoint.h"
#include "core/error.h"
#include "options/read_model.h"

namespace lmtrain::train {
namespace {

core::Config recorded_config(const std::string& yaml, const std::string& checkpoint_dir) {
  core::Config cfg = core::Config::defaults();
  cfg.merge_yaml_text(yaml, checkpoint_dir + "/meta.json config");
  return cfg;
}

}  // namespace

core::Config checkpoint_config(const LoadedCheckpoint& ckpt) {
  if (!ckpt.meta.contains("config") || !ckpt.meta["config"].is_string()) {
    throw Error("checkpoint " + ckpt.dir + " has no config in meta.json");
  }
  return recorded_config(ckpt.meta["config"].get<std::string>(), ckpt.dir);
}

core::Config checkpoint_config(const InferenceModel& loaded) {
  return recorded_config(loaded.config_yaml, loaded.checkpoint_dir);
}

int64_t checkpoint_seq_len(const LoadedCheckpoint& ckpt) {
  return checkpoint_config(ckpt).get_int("data.seq_len");
}

model::ModelOptions checkpoint_model_options(const LoadedCheckpoint& ckpt) {
  return options::read_model_options(checkpoint_config(ckpt), 0);
}

}  // namespace lmtrain::train
