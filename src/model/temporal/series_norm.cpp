#include "model/temporal/series_norm.h"

#include <torch/torch.h>

namespace lmtrain::model::temporal {

NormalisedSeries normalise_series(const torch::Tensor& values, const torch::Tensor& valid) {
  auto w = valid.to(values.scalar_type());                          // (B, C, L) 1 / 0
  auto x = torch::where(valid, values, torch::zeros_like(values));  // masked values never count
  auto count = w.sum(-1).clamp_min(1.0);                            // (B, C)
  auto mean = x.sum(-1) / count;                                    // (B, C)
  auto centred = (x - mean.unsqueeze(-1)) * w;                      // (B, C, L)
  auto std = (centred.pow(2).sum(-1) / count).sqrt().clamp_min(kMinSeriesStd);  // (B, C)
  return {centred / std.unsqueeze(-1), mean, std};
}

}  // namespace lmtrain::model::temporal
