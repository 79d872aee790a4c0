#include "checkpoint/run_output.h"

#include <filesystem>

#include "core/config.h"
#include "core/fs.h"
#include "core/output_dir.h"

namespace lmtrain::train {

void set_finetune_defaults(core::Config& cfg, const std::string& run_dir,
                           const std::string& origin) {
  const auto abs = std::filesystem::absolute(run_dir).lexically_normal().string();
  cfg.set("model.init_from", abs, origin);
  cfg.set("run.dir", abs + "-finetune", origin);
  if (cfg.get_int("train.max_steps") == 0 && cfg.get_int("train.epochs") == 0) {
    cfg.set("train.epochs", "1", origin);
  }
}

std::string write_one_checkpoint_run(core::OutputDir& out, int64_t step,
                                     const CheckpointFiles& files, nlohmann::json meta,
                                     const std::string& config_yaml) {
  CheckpointStore store(out.staging(), 0);
  store.save(step, files, std::move(meta), std::nullopt);
  core::write_file_atomic(out.staging() + "/config.yaml", config_yaml);
  out.commit();
  return out.path() + "/checkpoints/" + CheckpointStore::step_dir_name(step);
}

}  // namespace lmtrain::train
