// AdamW (decoupled weight decay, Loshchilov & Hutter) over FlatParams, with the exact
// operation order of torch::optim::AdamW so results match it. Weight decay applies only to
// FlatParams::decay_ranges() (matrices; not biases, norms, embeddings).
#pragma once
#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

#include "optim/flat_params.h"

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

class AdamW {
 public:
  AdamW(FlatParams& params, AdamWOptions opts);

  // One update with learning rate `lr` from the gradients in params.grads().
  void step(double lr);
  int64_t step_count() const { return step_; }
  // The flat moment buffers (exp_avg, exp_avg_sq), laid out like FlatParams::params().
  std::vector<at::Tensor> flat_state() const { return {exp_avg_, exp_avg_sq_}; }

  // State as named tensors ("exp_avg.<param name>", "exp_avg_sq.<param name>"): independent of
  // the flat layout, so checkpoints survive layout changes.
  std::vector<std::pair<std::string, at::Tensor>> state_tensors() const;
  void load_state(const std::vector<std::pair<std::string, at::Tensor>>& tensors, int64_t step);

 private:
  FlatParams& params_;
  AdamWOptions opts_;
  at::Tensor exp_avg_, exp_avg_sq_;  // (numel,) like params
  int64_t step_ = 0;
};

}  // namespace lmtrain::optim
