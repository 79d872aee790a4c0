// The run's resolved config as it is recorded (train/config_snapshot.h): the command's config,
// with what set-up finds out written into it under the keys it belongs to.
#pragma once
#include <string>

#include "core/config.h"
#include "train/config_snapshot.h"

namespace lmtrain::cli {

class RunConfigSnapshot : public train::ConfigSnapshot {
 public:
  explicit RunConfigSnapshot(core::Config config) : config_(std::move(config)) {}

  void record_vocab_size(int64_t vocab_size) override;
  void record_teacher(const std::string& teacher, const std::string& why) override;
  // Sets the model.* keys (but model.temporal.* and model.init_from) to the LM's, then reads the
  // model options (cli/read_options.h) of the result.
  model::ModelOptions adopt_lm_shape(const train::LoadedCheckpoint& lm) override;
  std::string yaml() const override { return config_.to_yaml(); }

  const core::Config& config() const { return config_; }

 private:
  core::Config config_;
};

}  // namespace lmtrain::cli
