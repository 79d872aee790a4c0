#include "optim/adamw.h"

#include <ATen/Parallel.h>

#include <cmath>
#include <map>

#include "core/config.h"
#include "core/error.h"
#include "kernels/cpu_kernels.h"
#include "kernels/kernel_switch.h"
#include "optim/adam_state.h"

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
  adam_update(p, g, exp_avg_, exp_avg_sq_, step_, lr, opts_);
}

void adam_update(at::Tensor p, const at::Tensor& g, at::Tensor m, at::Tensor v, int64_t step,
                 double lr, const AdamWOptions& o) {
  if (p.is_cuda()) {
    // libtorch's fused CUDA AdamW (torch.optim.AdamW(fused=True)): one multi-tensor kernel for
    // moments, bias corrections and the update. Weight decay is applied by the caller (only on
    // the decayed ranges), so it gets weight_decay 0 here.
    const auto steps = at::full({}, static_cast<double>(step), p.options().dtype(at::kFloat));
    at::_fused_adamw_({p}, {g}, {m}, {v}, {}, {steps}, lr, o.beta1, o.beta2, 0.0, o.eps,
                      /*amsgrad=*/false, /*maximize=*/false);
    return;
  }
  const double bc1 = 1.0 - std::pow(o.beta1, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(o.beta2, static_cast<double>(step));
  const bool fused = p.device().is_cpu() && p.scalar_type() == at::kFloat &&
                     g.scalar_type() == at::kFloat && m.scalar_type() == at::kFloat &&
                     v.scalar_type() == at::kFloat && p.is_contiguous() && g.is_contiguous() &&
                     m.is_contiguous() && v.is_contiguous();
  if (fused && kernels::fused_cpu_kernels_enabled()) {  // one pass instead of eight
    const kernels::AdamScalars s{
        static_cast<float>(o.beta1),       static_cast<float>(o.beta2),
        static_cast<float>(o.eps),         static_cast<float>(1.0 - o.beta1),
        static_cast<float>(1.0 - o.beta2), static_cast<float>(lr / bc1),
        static_cast<float>(std::sqrt(bc2))};
    float* pp = p.data_ptr<float>();
    const float* gp = g.data_ptr<float>();
    float* mp = m.data_ptr<float>();
    float* vp = v.data_ptr<float>();
    at::parallel_for(0, p.numel(), 1 << 15, [&](int64_t begin, int64_t end) {
      kernels::adam_update(pp + begin, gp + begin, mp + begin, vp + begin, end - begin, s);
    });
    return;
  }
  m.mul_(o.beta1).add_(g, 1.0 - o.beta1);
  v.mul_(o.beta2).addcmul_(g, g, 1.0 - o.beta2);
  auto denom = (v.sqrt() / std::sqrt(bc2)).add_(o.eps);
  p.addcdiv_(m, denom, -lr / bc1);
}

void AdamW::scale_grads(const at::Tensor& coef) {
  torch::NoGradGuard no_grad;
  params_.grads().mul_(coef);
}

int64_t AdamW::state_bytes() const {
  return (exp_avg_.numel() + exp_avg_sq_.numel()) * exp_avg_.element_size();
}

NamedTensors AdamW::state_tensors() const {
  NamedTensors out;
  for (const auto& seg : params_.segments()) {
    out.emplace_back("exp_avg." + seg.name, params_.view(exp_avg_, seg));
  }
  for (const auto& seg : params_.segments()) {
    out.emplace_back("exp_avg_sq." + seg.name, params_.view(exp_avg_sq_, seg));
  }
  return out;
}

void AdamW::load_state(const std::vector<NamedTensors>& rank_files, const nlohmann::json& layout,
                       int64_t step) {
  auto [m, v] = assemble_adam_state(params_, rank_files, layout);
  torch::NoGradGuard no_grad;
  exp_avg_.copy_(m);
  exp_avg_sq_.copy_(v);
  step_ = step;
}

}  // namespace lmtrain::optim
