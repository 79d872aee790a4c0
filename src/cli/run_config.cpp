#include "cli/run_config.h"

#include <algorithm>

#include "core/error.h"

namespace lmtrain::cli {

std::vector<FlagSpec> config_flags() {
  return {
      {"config", FlagKind::kValue, "YAML config file (e.g. configs/gpt2-tiny.yaml)", "FILE"},
      {"help-config", FlagKind::kBool, "print every config key with type, default and range"},
  };
}

core::Config load_run_config(const ParsedArgs& args, const std::string& preset) {
  core::Config cfg = core::Config::defaults();
  if (!preset.empty()) cfg.merge_yaml_file(preset);
  if (args.has("config")) cfg.merge_yaml_file(args.get("config"));
  for (const auto& [path, value] : args.overrides) cfg.set(path, value, "--" + path);
  // model.depth sets the model's shape: a shape key given beside it with another value would
  // train one model and record another in config.yaml. Refuse that; else record what depth sets.
  if (const int64_t depth = cfg.get_int("model.depth"); depth > 0) {
    const auto defaults = core::Config::defaults();
    for (const auto& [key, value] : core::depth_scaled_keys(depth)) {
      const bool given = cfg.get_int(key) != defaults.get_int(key) ||
                         std::any_of(args.overrides.begin(), args.overrides.end(),
                                     [&](const auto& o) { return o.first == key; });
      if (given && cfg.get_int(key) != value) {
        throw UsageError("model.depth = " + std::to_string(depth) + " (--depth) sets " + key +
                         " = " + std::to_string(value) + ", but " + key + " = " +
                         std::to_string(cfg.get_int(key)) +
                         " was given too: give one of them (depth scales the layers, width and "
                         "heads together)");
      }
      cfg.set(key, std::to_string(value), "model.depth");
    }
  }
  return cfg;
}

}  // namespace lmtrain::cli
