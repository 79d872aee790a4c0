// What a training step optimises, injected into the step (docs/architecture.md, "The seams").
//
// A Batch is named tensors plus the number of its valid (unmasked) target tokens. An Objective
// turns (model, batch) into a differentiable loss plus named metrics: the language-model loss
// (LmObjective), distillation from a teacher (distill_objective.h), later alignment losses.
//
// Normalisation: an objective returns per-token means over the batch's valid targets; the step
// weights each batch by valid_tokens / global_valid_tokens (the count over every micro-batch of
// every rank), so the gradient is that of the mean over all valid tokens of the global batch,
// and N ranks equal one rank even when ranks hold different numbers of valid tokens.
#pragma once
#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "model/gpt.h"
#include "model/moe.h"
#include "optim/flat_params.h"

namespace lmtrain::train {

struct Batch {
  // "inputs" (B, T) and "targets" (B, T) int64, targets = model::kIgnoreIndex where masked; an
  // objective may read more (e.g. a cached teacher's top-k).
  std::map<std::string, at::Tensor> tensors;
  int64_t valid_tokens = 0;  // targets != kIgnoreIndex (counted by whoever made the batch)
  bool masked = false;       // some target is kIgnoreIndex

  // Every target valid: an LM window of inputs and their next tokens.
  static Batch lm(at::Tensor inputs, at::Tensor targets);
  // Targets may hold kIgnoreIndex: counts the valid ones (reads targets on the host).
  static Batch with_mask(at::Tensor inputs, at::Tensor targets);

  const at::Tensor& inputs() const { return tensors.at("inputs"); }
  const at::Tensor& targets() const { return tensors.at("targets"); }
  int64_t rows() const { return inputs().size(0); }
  // Rows [begin, begin + n) of every tensor with the batch's row count as dim 0.
  Batch rows(int64_t begin, int64_t n) const;
};

struct ObjectiveOutput {
  // Differentiable scalar: the mean over the batch's valid targets of the per-token loss (0,
  // with a graph, when there is none). The step weights it by the batch's share of the global
  // valid tokens.
  at::Tensor loss;
  // Per-batch terms (MoE balancing) that are not per-token means: weighted 1 / micro-steps.
  at::Tensor batch_term;
  // Detached per-token means, in Objective::metric_names() order (e.g. kd and ce).
  std::vector<at::Tensor> metrics;
  std::vector<model::MoeStats> moe_stats;  // one per MoE layer of the trained model
};

class Objective {
 public:
  virtual ~Objective() = default;
  // Runs the forward of `model` (and anything else the objective owns, e.g. a teacher) on
  // `batch`. Called under the runtime's autocast, possibly concurrently from several step
  // workers on disjoint row slices.
  virtual ObjectiveOutput compute(model::GptImpl& model, const Batch& batch) = 0;
  // Names of the metrics compute() returns, logged beside the loss.
  virtual std::vector<std::string> metric_names() const = 0;
  // Parameters the objective trains beside the model (distillation's feature projections), or
  // null. They join the model's in the flat buffers under kObjectivePrefix (gradients, optimizer
  // state, gradient sync) and are saved in the training checkpoint's objective.safetensors,
  // never with the model.
  virtual model::TaggedModule* trained_module() { return nullptr; }
};

inline constexpr const char* kObjectivePrefix = "objective.";

// What the flat buffers of a run hold: the model's trainable parameters, then the objective's.
std::vector<optim::ParamSource> trained_param_sources(model::GptImpl& model, Objective* objective);

// Next-token cross-entropy (plus the MoE balancing terms of an MoE model). No extra metrics:
// the loss is the cross-entropy.
//
// Packed rows (model/document_mask.h): a batch's "documents" (B, T) tensor (packed chat rows,
// train/chat_data.h) keeps attention inside each document; without one, document_end_token >= 0
// (data.document_mask) splits token windows after each such token (prepare's <|endoftext|>).
class LmObjective : public Objective {
 public:
  explicit LmObjective(int64_t document_end_token = -1) : document_end_token_(document_end_token) {}
  ObjectiveOutput compute(model::GptImpl& model, const Batch& batch) override;
  std::vector<std::string> metric_names() const override { return {}; }

 private:
  int64_t document_end_token_;
};

// The batch's "documents" (B, T), or those document_end_token makes of its inputs (>= 0), or
// undefined.
at::Tensor batch_documents(const Batch& batch, int64_t document_end_token);

}  // namespace lmtrain::train
