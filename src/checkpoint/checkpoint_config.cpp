#include "checkpoint/checkpoint_config.h"

#include "core/error.h"

namespace lmtrain::train {

core::Config recorded_config(const std::string& yaml, const std::string& checkpoint_dir) {
  core::Config cfg = core::Config::defaults();
  cfg.merge_yaml_text(yaml, checkpoint_dir + "/meta.json config");
  return cfg;
}

core::Config checkpoint_config(const LoadedCheckpoint& ckpt) {
  if (!ckpt.meta.contains("config") || !ckpt.meta["config"].is_string()) {
    throw Error("checkpoint " + ckpt.dir + " has no config in meta.json");
  }
  return recorded_config(ckpt.meta["config"].get<std::string>(), ckpt.dir);
}

}  // namespace lmtrain::train
