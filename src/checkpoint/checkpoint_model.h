// A model + tokenizer restored from a checkpoint for inference (generate, eval).
#pragma once
#include <memory>
#include <string>

#include "core/config.h"
#include "core/runtime.h"
#include "data/bpe_tokenizer.h"
#include "model/gpt.h"

namespace lmtrain::train {

struct InferenceModel {
  model::Gpt model{nullptr};
  std::unique_ptr<data::BpeTokenizer> tokenizer;
  std::unique_ptr<core::Config> config;  // as resolved when the checkpoint was trained
  std::string checkpoint_dir;
  int64_t step = 0;
};

// spec: a checkpoint dir, a latest/best link, or a run dir (its latest checkpoint).
// The model is in eval mode, on rt's device.
InferenceModel load_inference_model(const std::string& spec,
                                    const core::Runtime& rt = core::Runtime::cpu());

}  // namespace lmtrain::train
