#include "optim/adamw.h"

#include <ATen/Parallel.h>

#include <cmath>
#include <map>
#include <optional>

#include "core/error.h"
#include "kernels/cpu_kernels.h"
#include "kernels/kernel_switch.h"
#include "optim/adam_state.h"

namespace lmtrain::optim {

AdamW::AdamW(FlatParams& params, AdamWOptions opts, dist::Group* expert_group)
    : params_(params), opts_(opts), expert_group_(expert_group) {
  exp_avg_ = torch::zeros_like(params.params());
  exp_avg_sq_ = torch::zeros_like(params.params());
}

void AdamW::update(double lr, const at::Tensor& found_inf) {
  torch::NoGradGuard no_grad;
  ++step_;
  auto p = params_.params();
  const auto& g = params_.grads();
  // On a GPU the step's scalars live on the device (a CUDA graph can replay the update); an
  // update that the device may skip takes that path on any device.
  if (found_inf.defined()) scalars_.use_on_cpu();
  const DeviceStepScalars* dev = scalars_.begin_on_device(p, lr, step_);
  adamw_update(p, g, exp_avg_, exp_avg_sq_, params_.decay_ranges(), step_, lr, opts_, dev,
               found_inf);
  if (found_inf.defined()) scalars_.skip_if(found_inf);
}

Ranges ranges_within(const Ranges& ranges, int64_t lo, int64_t n) {
  Ranges out;
  for (const auto& [b, e] : ranges) {
    const int64_t from = std::max(b, lo), to = std::min(e, lo + n);
    if (from < to) out.emplace_back(from - lo, to - lo);
  }
  return out;
}

namespace {

// One libtorch fused AdamW call over the pieces [b, e) of p, g, m, v, reading lr and the step
// count from the device scalars (one multi-tensor launch however many pieces).
void fused_adamw_pieces(const at::Tensor& p, const at::Tensor& g, const at::Tensor& m,
                        const at::Tensor& v, const Ranges& pieces, double weight_decay,
                        const AdamWOptions& o, const DeviceStepScalars& dev,
                        const at::Tensor& found_inf) {
  if (pieces.empty()) return;
  std::vector<at::Tensor> ps, gs, ms, vs, steps;
  for (const auto& [b, e] : pieces) {
    ps.push_back(p.narrow(0, b, e - b));
    gs.push_back(g.narrow(0, b, e - b));
    ms.push_back(m.narrow(0, b, e - b));
    vs.push_back(v.narrow(0, b, e - b));
    steps.push_back(dev.steps());  // read, not advanced, by the kernel: one count for all
  }
  const std::optional<at::Tensor> skip =
      found_inf.defined() ? std::optional<at::Tensor>(found_inf) : std::nullopt;
  at::_fused_adamw_(ps, gs, ms, vs, {}, steps, dev.lr(), o.beta1, o.beta2, weight_decay, o.eps,
                    /*amsgrad=*/false, /*maximize=*/false, /*grad_scale=*/std::nullopt, skip);
}

}  // namespace

void adamw_update(at::Tensor p, const at::Tensor& g, at::Tensor m, at::Tensor v,
                  const Ranges& decayed, int64_t step, double lr, const AdamWOptions& o,
                  const DeviceStepScalars* device_scalars, const at::Tensor& found_inf) {
  if (o.weight_decay == 0 || decayed.empty()) {
    adam_update(p, g, m, v, step, lr, o, device_scalars, found_inf);
    return;
  }
  if (!device_scalars) {
    if (found_inf.defined()) {  // refused before anything is decayed
      throw Error("internal: an update skipped on the device needs the device step scalars");
    }
    for (const auto& [b, e] : decayed) p.narrow(0, b, e - b).mul_(1.0 - lr * o.weight_decay);
    adam_update(p, g, m, v, step, lr, o, nullptr, found_inf);
    return;
  }
  Ranges rest;  // the complement of `decayed` in [0, numel)
  int64_t at = 0;
  for (const auto& [b, e] : decayed) {
    if (b > at) rest.emplace_back(at, b);
    at = e;
  }
  if (at < p.numel()) rest.emplace_back(at, p.numel());
  fused_adamw_pieces(p, g, m, v, decayed, o.weight_decay, o, *device_scalars, found_inf);
  fused_adamw_pieces(p, g, m, v, rest, 0.0, o, *device_scalars, found_inf);
}

void adam_update(at::Tensor p, const at::Tensor& g, at::Tensor m, at::Tensor v, int64_t step,
                 double lr, const AdamWOptions& o, const DeviceStepScalars* device_scalars,
                 const at::Tensor& found_inf) {
  if (found_inf.defined() && !device_scalars) {
    throw Error("internal: an update skipped on the device needs the device step scalars");
  }
  if (device_scalars) {
    // libtorch's fused AdamW (torch.optim.AdamW(fused=True)): one multi-tensor kernel for
    // moments, bias corrections and the update, reading lr and the step count from the device.
    // Weight decay is applied by the caller (only on the decayed ranges), so it gets 0 here.
    // With found_inf = 1 the kernel returns before writing anything (as under a GradScaler).
    const std::optional<at::Tensor> skip =
        found_inf.defined() ? std::optional<at::Tensor>(found_inf) : std::nullopt;
    at::_fused_adamw_({p}, {g}, {m}, {v}, {}, {device_scalars->steps()}, device_scalars->lr(),
                      o.beta1, o.beta2, 0.0, o.eps, /*amsgrad=*/false, /*maximize=*/false,
                      /*grad_scale=*/std::nullopt, skip);
    return;
  }
  if (p.is_cuda()) {  // the same fused kernel with host scalars (Muon's AdamW group)
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

at::Tensor AdamW::grad_norm() {
  if (!expert_group_) return params_.grad_norm();
  return expert_grad_norm(params_, params_.shared_region(params_.grads()), *expert_group_,
                          /*shared_group=*/nullptr);
}

at::Tensor expert_grad_norm(const FlatParams& flat, const at::Tensor& shared_grads,
                            dist::Group& expert_group, dist::Group* shared_group) {
  // Every parameter once: the shared part (summed over shared_group when each rank holds a
  // shard of it), the expert stacks summed over the EP group (each rank holds other experts).
  torch::NoGradGuard no_grad;
  auto shared = shared_grads.to(torch::kFloat64).square().sum().reshape({1});
  if (shared_group) shared_group->allreduce(shared, dist::ReduceOp::kSum)->wait();
  auto experts = flat.expert_grads().to(torch::kFloat64).square().sum().reshape({1});
  expert_group.allreduce(experts, dist::ReduceOp::kSum)->wait();
  return (shared + experts).sqrt().reshape({});
}

NamedTensors named_expert_state(const FlatParams& flat, const at::Tensor& exp_avg,
                                const at::Tensor& exp_avg_sq, int64_t origin) {
  NamedTensors out;
  for (const auto* k : {"exp_avg.", "exp_avg_sq."}) {
    const auto& buf = std::string(k) == "exp_avg." ? exp_avg : exp_avg_sq;
    for (const auto& seg : flat.segments()) {
      if (!seg.expert) continue;
      out.emplace_back(k + seg.name, buf.narrow(0, seg.offset - origin, seg.numel).view(seg.shape));
    }
  }
  return out;
}

NamedTensors AdamW::expert_state() const {
  return named_expert_state(params_, exp_avg_, exp_avg_sq_, 0);
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
  load_saved_state(SavedTensorsInMemory(rank_files), layout, step);
}

void AdamW::load_saved_state(const SavedTensors& saved, const nlohmann::json& layout,
                             int64_t step) {
  // Every element: the moments are read straight into the buffers, no whole copy beside them.
  read_adam_range(params_, saved, layout, 0, exp_avg_, exp_avg_sq_);
  restart_count(step);
}

}  // namespace lmtrain::optim
