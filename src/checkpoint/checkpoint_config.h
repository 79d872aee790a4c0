// The resolved config a checkpoint records (meta.json "config", the run's config.yaml), read back
// as a core::Config for the commands and the importers that read or rewrite its keys. Code below
// the commands asks for the typed parts instead (training_checkpoint.h: checkpoint_model_options,
// checkpoint_seq_len; InferenceModel's options), read through options/read_model.h.
#pragma once
#include <string>

#include "checkpoint/checkpoint_model.h"
#include "checkpoint/checkpoint_store.h"
#include "core/config.h"

namespace lmtrain::train {

// Schema defaults < the recorded YAML; throws Error when meta.json holds no config.
core::Config checkpoint_config(const LoadedCheckpoint& ckpt);
// The same for a checkpoint loaded for inference (its config_yaml).
core::Config checkpoint_config(const InferenceModel& loaded);

}  // namespace lmtrain::train
