#include "cli/run_config.h"

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
  return cfg;
}

}  // namespace lmtrain::cli
