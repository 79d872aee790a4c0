#include "cli/model_presets.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include "core/config.h"
#include "core/log.h"
#include "model/build_model.h"
#include "options/read_model.h"

namespace fs = std::filesystem;

namespace lmtrain::cli {

std::string find_configs_dir() {
  if (fs::is_directory("configs")) return "configs";
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n > 0) {
    const auto dir = fs::path(std::string(buf, static_cast<size_t>(n))).parent_path();
    for (const auto& candidate : {dir / "configs", dir.parent_path() / "configs"}) {
      if (fs::is_directory(candidate)) return candidate.string();
    }
  }
  return "";
}

std::string describe_presets(const std::string& configs_dir) {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(configs_dir)) {
    if (e.path().extension() == ".yaml") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  std::string out;
  for (const auto& file : files) {
    core::Config cfg = core::Config::defaults();
    cfg.merge_yaml_file(file);
    const bool vocab_assumed = cfg.get_int("model.vocab_size") == 0;
    if (vocab_assumed) cfg.set("model.vocab_size", "50304", "--help-models");
    auto mcfg = options::read_gpt_config(cfg, 0);
    // Built, not estimated: the count is the sum of the module's parameter sizes. Without init
    // the weights are never written, so even multi-billion-parameter presets cost no memory.
    auto m = model::build_model(options::read_model_options(cfg, 0), core::Runtime::cpu(),
                                {/*init=*/false, {}});
    int64_t count = 0;
    for (const auto& p : m->parameters()) count += p.numel();
    out += log::format("%-22s %9.2fM  %s%s\n", fs::path(file).filename().c_str(), count / 1e6,
                       mcfg.describe().c_str(), vocab_assumed ? " [vocab 50304 assumed]" : "");
  }
  return out;
}

}  // namespace lmtrain::cli
