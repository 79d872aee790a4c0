#include "objective/temporal_objective.h"

#include <ATen/ATen.h>

#include "core/error.h"

namespace lmtrain::train {

TemporalAlignmentObjective::TemporalAlignmentObjective(model::temporal::TemporalEncoder encoder)
    : encoder_(std::move(encoder)) {}

at::Tensor TemporalAlignmentObjective::soft_token_values(
    model::temporal::TemporalEncoderImpl& encoder, const Batch& batch) {
  const auto& series = batch.tensors.at("series");  // (B, K, C, L)
  if (series.dim() != 4) throw Error("temporal batch: series must be (B, K, C, L)");
  const int64_t B = series.size(0), K = series.size(1), C = series.size(2), L = series.size(3);
  auto out = encoder.forward(series.reshape({B * K, C, L}),
                             batch.tensors.at("series_valid").reshape({B * K, C, L}));
  // A token counts when its series is used and it is valid (not a padding patch): (B K, S).
  auto keep = out.valid & batch.tensors.at("series_used").reshape({B * K, 1});
  return out.tokens.index({keep});  // (n, lm_width), row-major over (sample, series, token)
}

ObjectiveOutput TemporalAlignmentObjective::compute(model::GptImpl& model, const Batch& batch) {
  model::SoftTokens soft{batch.tensors.at("soft_slots"), soft_token_values(*encoder_, batch)};
  auto terms = model.loss_terms(batch.inputs(), batch.targets(), /*masked=*/true, &soft);
  ObjectiveOutput out;
  out.loss = terms.ce;
  out.batch_term = terms.moe_objective;
  out.moe_stats = std::move(terms.moe_stats);
  return out;
}

}  // namespace lmtrain::train
