// A model + tokenizer restored from a checkpoint for inference (generate, eval).
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/runtime.h"
#include "core/safetensors.h"
#include "data/bpe_tokenizer.h"
#include "model/gpt.h"

namespace lmtrain::train {

struct InferenceModel {
  model::Gpt model{nullptr};
  std::unique_ptr<data::BpeTokenizer> tokenizer;
  std::unique_ptr<core::Config> config;  // as resolved when the checkpoint was trained
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
