// Feature and expert-output distillation, beside the logit loss (distill_objective.h): the
// student's hidden states after chosen blocks, and its MoE layers' outputs, are pulled towards
// the teacher's at matching depths by a mean squared error, through a learned linear projection
// (student width -> teacher width) where the widths differ (FitNets, Romero et al. 2015;
// TinyBERT, Jiao et al. 2020).
//
//   feature = mean over the pairs (s, t) of  mean over valid rows of  mean_c (P_s h_s - h_t)^2
//   expert  = the same over pairs of MoE layers, on the MoE feed-forward outputs
//   loss   += distill.feature_weight * feature + distill.expert_weight * expert
//
// The projections are parameters the objective trains beside the student: they join the flat
// buffers (gradients, optimizer state, gradient sync) and the training checkpoint, never the
// student's model.safetensors or an export.
#pragma once
#include <string>
#include <vector>

#include "distill/distill_options.h"
#include "model/gpt_config.h"
#include "model/param_tags.h"

namespace lmtrain::train {

struct LayerPair {
  int64_t student = 0, teacher = 0;
};

// The teacher layer at the student layer's relative depth: round((s + 1) Lt / Ls) - 1, so the
// last student layer meets the last teacher layer.
int64_t matching_layer(int64_t s, int64_t student_layers, int64_t teacher_layers);

// "S" or "S:T", comma-separated ("1,3" or "0:1,3:7"; "all" = every student layer); S, T index
// the student's and the teacher's layers. An S alone takes matching_layer(S). Throws
// UsageError naming `key` and the text for anything else, or a layer out of range.
std::vector<LayerPair> parse_layer_pairs(const std::string& text, int64_t student_layers,
                                         int64_t teacher_layers, const std::string& key);

struct FeatureDistillSpec {
  std::vector<LayerPair> features;  // block indices
  double feature_weight = 0;
  std::vector<LayerPair> experts;  // indices among each model's MoE layers (k-th MoE layer)
  double expert_weight = 0;
  int64_t student_width = 0, teacher_width = 0;

  bool active() const { return !features.empty() || !experts.empty(); }
  // From distill.feature_layers, distill.feature_weight and distill.expert_weight, checked
  // against both models: expert distillation needs MoE layers in both; every student MoE layer
  // is paired with the teacher's at its relative depth among the teacher's MoE layers.
  static FeatureDistillSpec make(const DistillOptions& distill, const model::GptConfig& student,
                                 const model::GptConfig& teacher);
};

// The learned projections, "feature_<i>" and "expert_<i>" (teacher width, student width), one per
// pair, only when the widths differ. Initialised as torch.nn.Linear (kaiming-uniform, bound
// 1/sqrt(student width)) from their own generator seeded by `seed`, so every rank and every
// resume-free rerun draws the same matrices whatever else used the global generator.
class FeatureProjectionsImpl : public model::TaggedModule {
 public:
  FeatureProjectionsImpl(const FeatureDistillSpec& spec, uint64_t seed);
  // x (..., Cs) -> (..., Ct); the identity when the widths are equal.
  torch::Tensor feature(size_t i, const torch::Tensor& x) const;
  torch::Tensor expert(size_t i, const torch::Tensor& x) const;

 private:
  std::vector<torch::Tensor> feature_, expert_;
};
TORCH_MODULE(FeatureProjections);

// Mean over rows of the per-element mean squared difference: student (N, C) (differentiable),
// teacher (N, C). Computed in fp32 at least; N = 0 gives 0 with a graph.
torch::Tensor feature_mse(const torch::Tensor& student, const torch::Tensor& teacher);

}  // namespace lmtrain::train
