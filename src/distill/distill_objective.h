// Knowledge distillation as a training objective: on every micro-batch the teacher runs on the
// same tokens as the student (eval mode, no gradients, in its own dtype), and the student
// minimises alpha * kd + (1 - alpha) * ce (model/distill_loss.h) over the valid targets, plus
// its own MoE balancing terms, plus optionally the feature and MoE-output terms of
// feature_distill.h. The teacher is never part of the student's parameters: it gets no
// gradient, no optimizer state, no all-reduce, and is not saved with the student.
#pragma once
#include <functional>
#include <memory>

#include "distill/feature_distill.h"
#include "model/distill_loss.h"
#include "model/gpt.h"
#include "objective/objective.h"

namespace lmtrain::train {

class DistillObjective : public Objective {
 public:
  // chunked: the chunked loss (neither model's (N, V) logits exist at once); else the plain
  // autograd formula on full logits.
  // features: hidden-state and MoE-output pairs (none by default); their projections are drawn
  // from `seed`.
  DistillObjective(model::Gpt teacher, model::DistillLossSpec spec, bool chunked,
                   FeatureDistillSpec features = {}, uint64_t seed = 0);
  // The offline teacher: each batch carries the teacher's top-k as "teacher_logits" and
  // "teacher_index" (n, T, k) (distill/teacher_cache.h); the loss is the chunked one on that
  // support.
  explicit DistillObjective(model::DistillLossSpec spec);

  ObjectiveOutput compute(model::GptImpl& student, const Batch& batch) override;
  // kd = T^2 KL(teacher || student) at temperature T, ce = the student's cross-entropy, then
  // "feature" and "expert" (feature_distill.h) when those terms are on.
  std::vector<std::string> metric_names() const override;
  // The feature projections, when the widths differ.
  model::TaggedModule* trained_module() override {
    return projections_ && !projections_->parameters().empty() ? projections_.get() : nullptr;
  }
  model::GptImpl& teacher() { return *teacher_; }
  // Tensor parallelism's loss (parallel/vocab_parallel_distill.h), installed from outside as
  // GptImpl::set_loss_head is: the student's final hidden states are then this rank's positions
  // (B, T_seq / T, Cs) and its head_weight() this rank's vocabulary rows; ht the teacher's
  // whole (B, T_seq, Ct), wt its whole head; targets (B, T_seq) with kIgnoreIndex. Null: the
  // one-process loss. Only the logit loss of an online teacher (run_build refuses the rest).
  using SplitLoss = std::function<model::DistillLoss(
      const at::Tensor& hs, const at::Tensor& ws, const at::Tensor& ht, const at::Tensor& wt,
      const at::Tensor& targets, const model::DistillLossSpec& spec)>;
  void set_split_loss(SplitLoss f) { split_loss_ = std::move(f); }
  FeatureProjectionsImpl& projections() { return *projections_; }
  bool offline() const { return !teacher_; }

 private:
  model::Gpt teacher_{nullptr};  // null: offline
  model::DistillLossSpec spec_;
  bool chunked_;
  FeatureDistillSpec features_;
  FeatureProjections projections_{nullptr};
  SplitLoss split_loss_;
};

}  // namespace lmtrain::train
