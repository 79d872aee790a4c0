#include "distill/distill_objective.h"

#include <torch/torch.h>

#include "core/error.h"

namespace lmtrain::train {

DistillObjective::DistillObjective(model::Gpt teacher, model::DistillLossSpec spec, bool chunked,
                                   FeatureDistillSpec features, uint64_t seed)
    : teacher_(std::move(teacher)),
      spec_(spec),
      chunked_(chunked),
      features_(std::move(features)),
      projections_(features_, seed) {
  teacher_->eval();
  for (auto& p : teacher_->parameters()) p.set_requires_grad(false);
  spec_.teacher_softcap = teacher_->config().logit_softcap;
  projections_->to(teacher_->device());
}

std::vector<std::string> DistillObjective::metric_names() const {
  std::vector<std::string> names{"kd", "ce"};
  if (!features_.features.empty()) names.push_back("feature");
  if (!features_.experts.empty()) names.push_back("expert");
  return names;
}

DistillObjective::DistillObjective(model::DistillLossSpec spec) : spec_(spec), chunked_(true) {}

ObjectiveOutput DistillObjective::compute(model::GptImpl& student, const Batch& batch) {
  if (teacher_ && student.config().vocab_size != teacher_->config().vocab_size) {
    throw UsageError(
        "distillation: the student's vocabulary (" + std::to_string(student.config().vocab_size) +
        ") differs from the teacher's (" + std::to_string(teacher_->config().vocab_size) + ")");
  }
  // The student's and the teacher's intermediate activations the feature terms compare.
  model::HiddenTaps st, tt;
  for (const auto& p : features_.features) {
    st.block_layers.push_back(p.student);
    tt.block_layers.push_back(p.teacher);
  }
  st.moe_outputs = tt.moe_outputs = !features_.experts.empty();
  auto hs = student.final_hidden(batch.inputs(), st);  // (B, T, Cs)
  // Online: the teacher's hidden states (B, T, Ct). Offline: its top-k logits and their token
  // ids (B, T, k), read from the cache with the batch.
  torch::Tensor ht, index;
  if (teacher_) {
    torch::NoGradGuard no_grad;
    ht = teacher_->final_hidden(batch.inputs(), tt);
  } else {
    ht = batch.tensors.at("teacher_logits");
    index = batch.tensors.at("teacher_index");
    index = index.reshape({-1, index.size(-1)});  // (N, k)
  }
  model::DistillLossSpec spec = spec_;
  spec.student_softcap = student.config().logit_softcap;
  model::DistillLoss d;
  torch::Tensor keep;  // (n,) the rows with a target, when some are masked
  if (split_loss_) {   // tensor parallelism: hs is this rank's positions; no feature terms
    d = split_loss_(hs, student.head_weight(), ht, teacher_->head_weight(), batch.targets(), spec);
  } else {
    hs = hs.reshape({-1, hs.size(-1)});  // (N, Cs)
    ht = ht.reshape({-1, ht.size(-1)});  // (N, Ct) or (N, k)
    auto targets = batch.targets().reshape({-1});
    if (batch.masked) {  // only rows with a target count
      keep = model::valid_target_rows(targets);
      hs = hs.index_select(0, keep);
      ht = ht.index_select(0, keep);
      if (index.defined()) index = index.index_select(0, keep);
      targets = targets.index_select(0, keep);
    }
    if (!teacher_) {
      if (student.head_has_adapter()) {
        throw UsageError(
            "distill.cache with a LoRA adapter on the head (lora.targets=head) is not "
            "supported: leave the head out of lora.targets, or use the online teacher");
      }
      d = model::distill_loss_chunked_cached(hs, student.head_weight(), ht, index, targets, spec);
    } else if (chunked_ && !student.head_has_adapter()) {
      d = model::distill_loss_chunked(hs, student.head_weight(), ht, teacher_->head_weight(),
                                      targets, spec);
    } else {
      torch::Tensor zt;
      {
        torch::NoGradGuard no_grad;
        zt = teacher_->logits(ht);
      }
      d = model::distill_loss_from_logits(student.logits(hs), zt, targets, spec);
    }
  }
  model::LossTerms terms;
  model::GptImpl::add_moe_terms(st.moe, terms);
  ObjectiveOutput out;
  out.loss = d.loss;
  out.batch_term = terms.moe_objective;
  out.moe_stats = std::move(terms.moe_stats);
  out.metrics = {d.kd, d.ce};
  // Feature terms: (B, T, C) activations -> (n, C) valid rows, projected to the teacher's width.
  auto rows = [&](const torch::Tensor& a) {
    auto flat = a.reshape({-1, a.size(-1)});
    return keep.defined() ? flat.index_select(0, keep) : flat;
  };
  auto mean_mse = [&](const std::vector<LayerPair>& pairs, const std::vector<torch::Tensor>& s,
                      const std::vector<torch::Tensor>& t, bool experts) {
    torch::Tensor sum;
    for (size_t i = 0; i < pairs.size(); ++i) {
      const auto& a = experts ? s.at(pairs[i].student) : s.at(i);
      const auto& b = experts ? t.at(pairs[i].teacher) : t.at(i);
      auto projected =
          experts ? projections_->expert(i, rows(a)) : projections_->feature(i, rows(a));
      auto term = feature_mse(projected, rows(b));
      sum = sum.defined() ? sum + term : term;
    }
    return sum / static_cast<double>(pairs.size());
  };
  if (!features_.features.empty()) {
    auto f = mean_mse(features_.features, st.blocks, tt.blocks, false);
    out.loss = out.loss + features_.feature_weight * f;
    out.metrics.push_back(f.detach());
  }
  if (!features_.experts.empty()) {
    auto e = mean_mse(features_.experts, st.moe_out, tt.moe_out, true);
    out.loss = out.loss + features_.expert_weight * e;
    out.metrics.push_back(e.detach());
  }
  return out;
}

}  // namespace lmtrain::train
