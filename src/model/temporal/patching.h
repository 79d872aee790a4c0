// Cutting series into patches (PatchTST): every `stride` values a window of `patch_len` values
// becomes one encoder token. A series whose length leaves a short last window is padded with
// zeros; a mask channel beside the values tells the encoder which entries are real.
#pragma once
#include <torch/types.h>

#include "model/temporal/temporal_options.h"

namespace lmtrain::model::temporal {

// Features per patch: each channel's values, their local deviations (x_t minus the mean of its
// two neighbours, 0 where one is missing: what makes a spike stand out), and the masks.
inline constexpr int64_t kPatchFeatureGroups = 3;

struct Patches {
  torch::Tensor features;  // (B, P, 3 C patch_len): values, local deviations, masks
  torch::Tensor valid;     // (B, P) bool: the patch holds at least one valid value
};

// values (B, C, L) (already normalised), valid (B, C, L) bool. P = options.patches_for(L).
Patches make_patches(const torch::Tensor& values, const torch::Tensor& valid,
                     const TemporalEncoderOptions& options);

// The soft tokens the encoder gives one series whose values are `valid` (C, L) bool, L <=
// options.max_length, in a batch padded to options.max_length: options.num_tokens when pooled,
// else its patches (of the padded series) holding a valid value and the summary token. Computed by
// make_patches itself, so a prompt's slot count always equals the encoder's valid tokens.
int64_t soft_token_count(const torch::Tensor& valid, const TemporalEncoderOptions& options);

}  // namespace lmtrain::model::temporal
