// A model + tokenizer restored from a checkpoint for inference (generate, eval).
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/runtime.h"
#include "core/safetensors.h"
#include "data/bpe_tokenizer.h"
#include "model/gpt.h"
#include "model/temporal/temporal_options.h"

namespace lmtrain::train {

struct InferenceModel {
  model::Gpt model{nullptr};
  std::unique_ptr<data::BpeTokenizer> tokenizer;
  // The config it was trained with, as resolved (meta.json "config"): checkpoint_config.h reads
  // it back for the commands (recorded_config).
  std::string config_yaml;
  bool temporal = false;  // model.temporal.enabled: the frozen LM of a temporal-encoder run
  // That run's model.temporal.* (lm_width and lm_vocab left 0: train::encoder_for_lm).
  model::temporal::TemporalEncoderOptions encoder;
  std::string checkpoint_dir;
  int64_t step = 0;
  // The tensors of the extra files asked for (e.g. objective.safetensors), read and verified
  // with the model's in one load; empty when none were asked for.
  std::map<std::string, core::SafetensorsFile> extra_files;
};

// spec: a checkpoint dir, a latest/best link, or a run dir (its latest checkpoint).
// The model is in eval mode, on rt's device.
InferenceModel load_inference_model(const std::string& spec,
                                    const core::Runtime& rt = core::Runtime::cpu(),
                                    const std::vector<std::string>& extra_files = {});

}  // namespace lmtrain::train
