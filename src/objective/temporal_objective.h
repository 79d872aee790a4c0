// The objective of the temporal-encoder pretrainer (issue 26): align a time-series encoder to a
// frozen decoder. The encoder turns each sample's series into soft tokens that stand at the
// placeholder slots of its prompt (model/soft_tokens.h); the loss is the decoder's next-token
// cross-entropy on the answer tokens only (the prompt and the soft tokens' positions carry
// model::kIgnoreIndex). The encoder is this objective's trained module, so it joins the flat
// buffers and the checkpoint's objective.safetensors; the decoder's parameters are frozen by
// the caller (parameter tags) and never saved.
//
// Batch tensors beside "inputs" and "targets" (B, T):
//   "series"        (B, K, C, L) float: K series slots per sample (C channels, L values)
//   "series_valid"  (B, K, C, L) bool:  which values are real (padding, missing values: false)
//   "series_used"   (B, K) bool:        which of the K slots hold a series (a sample with fewer
//                                       series leaves the rest unused)
//   "soft_slots"    (B, T) bool:        the prompt positions of the soft tokens, one per valid
//                                       encoder token of each used series, in series order
#pragma once
#include <string>
#include <vector>

#include "model/temporal/temporal_encoder.h"
#include "objective/objective.h"

namespace lmtrain::train {

class TemporalAlignmentObjective : public Objective {
 public:
  explicit TemporalAlignmentObjective(model::temporal::TemporalEncoder encoder);
  ObjectiveOutput compute(model::GptImpl& model, const Batch& batch) override;
  std::vector<std::string> metric_names() const override { return {}; }
  model::TaggedModule* trained_module() override { return encoder_.get(); }
  model::temporal::TemporalEncoder& encoder() { return encoder_; }

  // The soft tokens of a batch: the encoder's valid tokens of every used series, row-major
  // (sample, series, token): (n, lm_width).
  static at::Tensor soft_token_values(model::temporal::TemporalEncoderImpl& encoder,
                                      const Batch& batch);

 private:
  model::temporal::TemporalEncoder encoder_;
};

}  // namespace lmtrain::train
