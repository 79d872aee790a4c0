// Per-series normalisation (RevIN's instance normalisation without the affine part): each channel
// of each series is shifted by its mean and divided by its standard deviation over its valid
// values, so the encoder sees shapes, not scales. The offset and scale are not thrown away: the
// encoder takes them as an input of their own (temporal_encoder.h) and the prompt states them as
// text (data/temporal/), so questions about actual values stay answerable (ChatTS, OpenTSLM).
#pragma once
#include <torch/types.h>

namespace lmtrain::model::temporal {

// The floor of the standard deviation: a constant series normalises to zeros, not to inf/NaN.
inline constexpr double kMinSeriesStd = 1e-5;

struct NormalisedSeries {
  torch::Tensor values;  // (B, C, L): (x - mean) / std where valid, 0 elsewhere
  torch::Tensor mean;    // (B, C)
  torch::Tensor std;     // (B, C), >= kMinSeriesStd (population std over the valid values)
};

// values (B, C, L) float, valid (B, C, L) bool (false: padding or a missing value, whatever it
// holds). A channel with no valid value gets mean 0, std kMinSeriesStd.
NormalisedSeries normalise_series(const torch::Tensor& values, const torch::Tensor& valid);

}  // namespace lmtrain::model::temporal
