#include "train/distill_objective.h"

#include <torch/torch.h>

#include "core/error.h"

namespace lmtrain::train {

DistillObjective::DistillObjective(model::Gpt teacher, model::DistillLossSpec spec, bool chunked)
    : teacher_(std::move(teacher)), spec_(spec), chunked_(chunked) {
  teacher_->eval();
  for (auto& p : teacher_->parameters()) p.set_requires_grad(false);
  spec_.teacher_softcap = teacher_->config().logit_softcap;
}

DistillObjective::DistillObjective(model::DistillLossSpec spec) : spec_(spec), chunked_(true) {}

ObjectiveOutput DistillObjective::compute(model::GptImpl& student, const Batch& batch) {
  if (teacher_ && student.config().vocab_size != teacher_->config().vocab_size) {
    throw UsageError(
        "distillation: the student's vocabulary (" + std::to_string(student.config().vocab_size) +
        ") differs from the teacher's (" + std::to_string(teacher_->config().vocab_size) + ")");
  }
  std::vector<std::vector<torch::Tensor>> moe;
  auto hs = student.final_hidden(batch.inputs(), &moe);  // (B, T, Cs)
  // Online: the teacher's hidden states (B, T, Ct). Offline: its top-k logits and their token
  // ids (B, T, k), read from the cache with the batch.
  torch::Tensor ht, index;
  if (teacher_) {
    torch::NoGradGuard no_grad;
    ht = teacher_->final_hidden(batch.inputs());
  } else {
    ht = batch.tensors.at("teacher_logits");
    index = batch.tensors.at("teacher_index");
    index = index.reshape({-1, index.size(-1)});  // (N, k)
  }
  hs = hs.reshape({-1, hs.size(-1)});  // (N, Cs)
  ht = ht.reshape({-1, ht.size(-1)});  // (N, Ct) or (N, k)
  auto targets = batch.targets().reshape({-1});
  if (batch.masked) {  // only rows with a target count
    auto keep = model::valid_target_rows(targets);
    hs = hs.index_select(0, keep);
    ht = ht.index_select(0, keep);
    if (index.defined()) index = index.index_select(0, keep);
    targets = targets.index_select(0, keep);
  }
  model::DistillLossSpec spec = spec_;
  spec.student_softcap = student.config().logit_softcap;
  model::DistillLoss d;
  if (!teacher_) {
    if (student.head_has_adapter()) {
      throw UsageError(
          "distill.cache with a LoRA adapter on the head (lora.targets=head) is not "
          "supported: leave the head out of lora.targets, or use the online teacher");
    }
    d = model::distill_loss_chunked_cached(hs, student.head_weight(), ht, index, targets, spec);
  } else if (chunked_ && !student.head_has_adapter()) {
    d = model::distill_loss_chunked(hs, student.head_weight(), ht, teacher_->head_weight(), targets,
                                    spec);
  } else {
    torch::Tensor zt;
    {
      torch::NoGradGuard no_grad;
      zt = teacher_->logits(ht);
    }
    d = model::distill_loss_from_logits(student.logits(hs), zt, targets, spec);
  }
  model::LossTerms terms;
  model::GptImpl::add_moe_terms(moe, terms);
  ObjectiveOutput out;
  out.loss = d.loss;
  out.batch_term = terms.moe_objective;
  out.moe_stats = std::move(terms.moe_stats);
  out.metrics = {d.kd, d.ce};
  return out;
}

}  // namespace lmtrain::train
