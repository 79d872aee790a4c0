#include "optim/adamw.h"

#include <cmath>
#include <map>

#include "core/config.h"
#include "core/error.h"

namespace lmtrain::optim {

AdamWOptions AdamWOptions::from_config(const core::Config& cfg) {
  AdamWOptions o;
  o.beta1 = cfg.get_float("optim.beta1");
  o.beta2 = cfg.get_float("optim.beta2");
  o.eps = cfg.get_float("optim.eps");
  o.weight_decay = cfg.get_float("optim.weight_decay");
  return o;
}

AdamW::AdamW(FlatParams& params, AdamWOptions opts) : params_(params), opts_(opts) {
  exp_avg_ = torch::zeros_like(params.params());
  exp_avg_sq_ = torch::zeros_like(params.params());
}

void AdamW::step(double lr) {
  torch::NoGradGuard no_grad;
  ++step_;
  auto p = params_.params();
  const auto& g = params_.grads();
  if (opts_.weight_decay != 0) {
    for (const auto& [begin, end] : params_.decay_ranges()) {
      p.narrow(0, begin, end - begin).mul_(1.0 - lr * opts_.weight_decay);
    }
  }
  const double bc1 = 1.0 - std::pow(opts_.beta1, static_cast<double>(step_));
  const double bc2 = 1.0 - std::pow(opts_.beta2, static_cast<double>(step_));
  exp_avg_.mul_(opts_.beta1).add_(g, 1.0 - opts_.beta1);
  exp_avg_sq_.mul_(opts_.beta2).addcmul_(g, g, 1.0 - opts_.beta2);
  auto denom = (exp_avg_sq_.sqrt() / std::sqrt(bc2)).add_(opts_.eps);
  p.addcdiv_(exp_avg_, denom, -lr / bc1);
}

std::vector<std::pair<std::string, at::Tensor>> AdamW::state_tensors() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& seg : params_.segments()) {
    out.emplace_back("exp_avg." + seg.name, params_.view(exp_avg_, seg));
  }
  for (const auto& seg : params_.segments()) {
    out.emplace_back("exp_avg_sq." + seg.name, params_.view(exp_avg_sq_, seg));
  }
  return out;
}

void AdamW::load_state(const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                       int64_t step) {
  std::map<std::string, at::Tensor> by_name(tensors.begin(), tensors.end());
  torch::NoGradGuard no_grad;
  for (const char* kind : {"exp_avg.", "exp_avg_sq."}) {
    auto& flat = std::string(kind) == "exp_avg." ? exp_avg_ : exp_avg_sq_;
    for (const auto& seg : params_.segments()) {
      auto it = by_name.find(kind + seg.name);
      if (it == by_name.end()) {
        throw Error("optimizer state has no tensor '" + std::string(kind) + seg.name + "'");
      }
      auto dst = params_.view(flat, seg);
      if (it->second.sizes() != dst.sizes()) {
        throw Error("optimizer state tensor '" + it->first + "' has the wrong shape");
      }
      dst.copy_(it->second);
    }
  }
  step_ = step;
}

}  // namespace lmtrain::optim
