// Knowledge distillation as a training objective: on every micro-batch the teacher runs on the
// same tokens as the student (eval mode, no gradients, in its own dtype), and the student
// minimises alpha * kd + (1 - alpha) * ce (model/distill_loss.h) over the valid targets, plus
// its own MoE balancing terms. The teacher is never part of the student's parameters: it gets
// no gradient, no optimizer state, no all-reduce, and is not saved with the student.
#pragma once
#include <memory>

#include "model/distill_loss.h"
#include "model/gpt.h"
#include "train/objective.h"

namespace lmtrain::train {

class DistillObjective : public Objective {
 public:
  // chunked: the chunked loss (neither model's (N, V) logits exist at once); else the plain
  // autograd formula on full logits.
  DistillObjective(model::Gpt teacher, model::DistillLossSpec spec, bool chunked);
  // The offline teacher: each batch carries the teacher's top-k as "teacher_logits" and
  // "teacher_index" (n, T, k) (train/teacher_cache.h); the loss is the chunked one on that
  // support.
  explicit DistillObjective(model::DistillLossSpec spec);

  ObjectiveOutput compute(model::GptImpl& student, const Batch& batch) override;
  // kd = T^2 KL(teacher || student) at temperature T, ce = the student's cross-entropy.
  std::vector<std::string> metric_names() const override { return {"kd", "ce"}; }
  model::GptImpl& teacher() { return *teacher_; }
  bool offline() const { return !teacher_; }

 private:
  model::Gpt teacher_{nullptr};  // null: offline
  model::DistillLossSpec spec_;
  bool chunked_;
};

}  // namespace lmtrain::train
