// The resolved config a checkpoint records (meta.json "config", the run's config.yaml), read back
// as a core::Config for the commands and the importers that read or rewrite its keys. Code below
// the commands asks for the typed parts instead (training_checkpoint.h: checkpoint_model_options,
// checkpoint_seq_len; InferenceModel's options), read through options/read_model.h.
#pragma once
#include <string>
#include <vector>

#include "checkpoint/checkpoint_store.h"
#include "core/config.h"

namespace lmtrain::train {

// Schema defaults < `yaml`, the config a checkpoint in `checkpoint_dir` records (errors name its
// meta.json); e.g. an InferenceModel's config_yaml.
core::Config recorded_config(const std::string& yaml, const std::string& checkpoint_dir);
// The config ckpt's meta.json records; throws Error when it holds none.
core::Config checkpoint_config(const LoadedCheckpoint& ckpt);

// A key whose value differs between the config a checkpoint records and a run's, as canonical
// text.
struct ChangedSetting {
  std::string key, saved, now;
};
// Those of `keys` ("data.stream.block_mb") whose values in the config ckpt records differ from
// their values in `run_yaml` (this run's resolved config), in the order given.
std::vector<ChangedSetting> changed_settings(const LoadedCheckpoint& ckpt,
                                             const std::string& run_yaml,
                                             const std::vector<std::string>& keys);

}  // namespace lmtrain::train
