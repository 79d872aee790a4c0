#include "objective/objective.h"

#include <ATen/ATen.h>

#include <optional>

#include "model/document_mask.h"

namespace lmtrain::train {
namespace {

int64_t count_valid(const at::Tensor& targets) {
  return (targets != model::kIgnoreIndex).sum().item<int64_t>();
}

}  // namespace

Batch Batch::lm(at::Tensor inputs, at::Tensor targets) {
  Batch b;
  b.valid_tokens = targets.numel();
  b.tensors.emplace("inputs", std::move(inputs));
  b.tensors.emplace("targets", std::move(targets));
  return b;
}

Batch Batch::with_mask(at::Tensor inputs, at::Tensor targets) {
  Batch b;
  b.valid_tokens = count_valid(targets);
  b.masked = b.valid_tokens < targets.numel();
  b.tensors.emplace("inputs", std::move(inputs));
  b.tensors.emplace("targets", std::move(targets));
  return b;
}

Batch Batch::rows(int64_t begin, int64_t n) const {
  Batch b;
  const int64_t total = this->rows();
  for (const auto& [name, t] : tensors) {
    b.tensors.emplace(name, t.dim() > 0 && t.size(0) == total ? t.narrow(0, begin, n) : t);
  }
  b.masked = masked;
  b.valid_tokens = masked ? count_valid(b.targets()) : b.targets().numel();
  return b;
}

at::Tensor batch_documents(const Batch& batch, int64_t document_end_token) {
  auto it = batch.tensors.find("documents");
  if (it != batch.tensors.end()) return it->second;
  if (document_end_token >= 0) {
    return model::documents_from_end_token(batch.inputs(), document_end_token);
  }
  return {};
}

ObjectiveOutput LmObjective::compute(model::GptImpl& model, const Batch& batch) {
  const at::Tensor documents = batch_documents(batch, document_end_token_);
  std::optional<model::DocumentLayout> docs;
  if (documents.defined()) docs.emplace(documents);
  auto terms = model.loss_terms(batch.inputs(), batch.targets(), batch.masked, nullptr,
                                docs ? &*docs : nullptr);
  ObjectiveOutput out;
  out.loss = terms.ce;
  out.batch_term = terms.moe_objective;
  out.moe_stats = std::move(terms.moe_stats);
  return out;
}

std::vector<optim::ParamSource> trained_param_sources(model::GptImpl& model, Objective* objective) {
  std::vector<optim::ParamSource> sources{{"", &model, model.param_tags()}};
  if (auto* extra = objective ? objective->trained_module() : nullptr) {
    sources.push_back({kObjectivePrefix, extra, model::collect_param_tags(*extra)});
  }
  return sources;
}

}  // namespace lmtrain::train
