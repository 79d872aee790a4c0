// AdamW (decoupled weight decay, Loshchilov & Hutter) over FlatParams, with the exact
// operation order of torch::optim::AdamW so results match it. Weight decay applies only to
// FlatParams::decay_ranges() (matrices; not biases, norms, embeddings).
#pragma once
#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

#include "optim/flat_params.h"
#include "optim/optimizer.h"

namespace lmtrain::core {
class Config;
}

namespace lmtrain::optim {

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;

  // optim.beta1, optim.beta2, optim.eps, optim.weight_decay.
  static AdamWOptions from_config(const core::Config& cfg);
};

// The Adam moment update and parameter step (no weight decay) for equally shaped p, g, m, v,
// in torch::optim::AdamW's operation order; `step` counts this update (1 for the first).
// Shared by every AdamW variant so that replicated, sharded and Muon's AdamW group agree.
void adam_update(at::Tensor p, const at::Tensor& g, at::Tensor m, at::Tensor v, int64_t step,
                 double lr, const AdamWOptions& o);

// Replicated AdamW: every rank holds the whole state and updates every parameter.
class AdamW : public Optimizer {
 public:
  AdamW(FlatParams& params, AdamWOptions opts);

  std::string name() const override { return "adamw"; }
  int64_t shard_begin() const override { return 0; }
  int64_t shard_end() const override { return params_.numel(); }
  at::Tensor grad_norm() override { return params_.grad_norm(); }
  void scale_grads(const at::Tensor& coef) override;
  // One update with learning rate `lr` from the gradients in params.grads().
  void step(double lr) override;
  int64_t step_count() const override { return step_; }
  // The flat moment buffers (exp_avg, exp_avg_sq), laid out like FlatParams::params().
  std::vector<at::Tensor> replicated_state() const override { return {exp_avg_, exp_avg_sq_}; }
  int64_t state_bytes() const override;

  // State as named tensors ("exp_avg.<param name>", "exp_avg_sq.<param name>"): independent of
  // the flat layout, so checkpoints survive layout changes.
  NamedTensors state_tensors() const override;
  nlohmann::json state_layout() const override { return {{"kind", "named"}}; }
  void load_state(const std::vector<NamedTensors>& rank_files, const nlohmann::json& layout,
                  int64_t step) override;
  // The single-file form (a checkpoint written by a replicated optimizer).
  void load_state(const NamedTensors& tensors, int64_t step) {
    load_state(std::vector<NamedTensors>{tensors}, {{"kind", "named"}}, step);
  }

 private:
  FlatParams& params_;
  AdamWOptions opts_;
  at::Tensor exp_avg_, exp_avg_sq_;  // (numel,) like params
  int64_t step_ = 0;
};

}  // namespace lmtrain::optim
