// The run's resolved config as it is recorded: RUN_DIR/config.yaml and every checkpoint's
// meta.json ("config"), which later commands read back (resume checks, eval, generate, export).
// The command that read the config holds it (cli/run_config_snapshot.h, the one place that knows
// the keys); set-up tells it, in typed form, what it finds out on the way (the tokenizer's
// vocabulary, the teacher, a temporal run's LM), and no module reads its options from it.
#pragma once
#include <cstdint>
#include <string>

#include "checkpoint/checkpoint_store.h"
#include "model/build_model.h"

namespace lmtrain::train {

class ConfigSnapshot {
 public:
  virtual ~ConfigSnapshot() = default;
  // model.vocab_size as the tokenizer resolved it (GptConfig::fill_vocab_size).
  virtual void record_vocab_size(int64_t vocab_size) = 0;
  // distill.teacher: the teacher's checkpoint dir resolved, or the offline cache's teacher;
  // `why` says which (where the value came from).
  virtual void record_teacher(const std::string& teacher, const std::string& why) = 0;
  // A temporal run: the model keys become those of `lm` (model.init_from's checkpoint), so the run
  // builds the LM it loads; a key the config sets to another value than the LM has is a
  // UsageError naming both. Returns the run's model options with the LM's shape.
  virtual model::ModelOptions adopt_lm_shape(const LoadedCheckpoint& lm) = 0;
  // The YAML written to config.yaml and meta.json.
  virtual std::string yaml() const = 0;
};

}  // namespace lmtrain::train
