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

std::vector<ChangedSetting> changed_settings(const LoadedCheckpoint& ckpt,
                                             const std::string& run_yaml,
                                             const std::vector<std::string>& keys) {
  const core::Config saved = checkpoint_config(ckpt);
  core::Config now = core::Config::defaults();
  now.merge_yaml_text(run_yaml, "this run's config");
  // Canonical text, so that 64 and 64.0 (or true and True) are the same value.
  const auto text_of = [](const core::Config& cfg, const std::string& key) {
    const size_t dot = key.rfind('.');
    return cfg.section(key.substr(0, dot)).at(key.substr(dot + 1));
  };
  std::vector<ChangedSetting> out;
  for (const std::string& key : keys) {
    ChangedSetting c{key, text_of(saved, key), text_of(now, key)};
    if (c.saved != c.now) out.push_back(std::move(c));
  }
  return out;
}

}  // namespace lmtrain::train
