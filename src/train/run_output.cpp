#include "train/run_output.h"

#include "core/fs.h"
#include "core/output_dir.h"

namespace lmtrain::train {

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
