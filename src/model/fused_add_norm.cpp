#include "model/fused_add_norm.h"

#include <ATen/autocast_mode.h>
#include <torch/csrc/autograd/custom_function.h>

#include "kernels/fused_reference.h"
#include "kernels/kernel_switch.h"
#include "model/fused_kernel_call.h"

namespace lmtrain::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Inputs x, delta (or empty), weight, bias (or empty); outputs {h, y}, or {y} without a delta.
// Saves h, the fp32 weight and the row statistics.
class AddNormFunction : public torch::autograd::Function<AddNormFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x_in,
                               const at::Tensor& delta_in, const at::Tensor& weight,
                               const at::Tensor& bias, bool rms, double eps,
                               at::ScalarType y_dtype) {
    const int64_t C = x_in.size(-1), N = x_in.numel() / C;
    const at::Tensor x = x_in.contiguous();
    const bool has_delta = fused::present(delta_in), has_bias = fused::present(bias);
    const at::Tensor delta = has_delta ? delta_in.contiguous() : at::Tensor();
    const at::Tensor w = weight.to(at::kFloat).contiguous();
    const at::Tensor b = has_bias ? bias.to(at::kFloat).contiguous() : at::Tensor();
    at::Tensor h = has_delta ? at::empty_like(x) : x;
    at::Tensor y = at::empty_like(x, x.options().dtype(y_dtype));
    const auto stats = x.options().dtype(at::kFloat);
    at::Tensor mean = at::empty({N}, stats), rstd = at::empty({N}, stats);
    if (x.is_cuda()) {
      kernels::add_norm_forward_cuda(
          x.data_ptr(), fused::data_or_null(delta), w.data_ptr<float>(), fused::floats_or_null(b),
          N, C, static_cast<float>(eps), rms,
          {fused::element_type(x), has_delta ? fused::element_type(delta) : fused::element_type(x),
           fused::element_type(y)},
          h.data_ptr(), y.data_ptr(), mean.data_ptr<float>(), rstd.data_ptr<float>(),
          fused::current_stream(x));
    } else {
      const at::Tensor xf = fused::cpu_floats(x), df = fused::cpu_floats(delta);
      at::Tensor hf = at::empty({N, C}, stats), yf = at::empty({N, C}, stats);
      kernels::add_norm_forward_reference(
          xf.data_ptr<float>(), fused::floats_or_null(df), w.data_ptr<float>(),
          fused::floats_or_null(b), N, C, static_cast<float>(eps), rms,
          x.scalar_type() == at::kBFloat16, y_dtype == at::kBFloat16, hf.data_ptr<float>(),
          yf.data_ptr<float>(), mean.data_ptr<float>(), rstd.data_ptr<float>());
      if (has_delta) h.copy_(hf.view(x.sizes()));
      y.copy_(yf.view(x.sizes()));
    }
    ctx->save_for_backward({h, w, mean, rstd});
    ctx->saved_data["rms"] = rms;
    ctx->saved_data["has_delta"] = has_delta;
    ctx->saved_data["has_bias"] = has_bias;
    ctx->saved_data["delta_dtype"] = has_delta ? delta.scalar_type() : x.scalar_type();
    ctx->saved_data["weight_dtype"] = weight.scalar_type();
    if (has_delta) return {h, y};
    return {y};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &h = saved[0], &w = saved[1], &mean = saved[2], &rstd = saved[3];
    const bool rms = ctx->saved_data["rms"].toBool();
    const bool has_delta = ctx->saved_data["has_delta"].toBool();
    const bool has_bias = ctx->saved_data["has_bias"].toBool();
    at::Tensor dh = has_delta ? grads[0] : at::Tensor();
    at::Tensor dy = grads[has_delta ? 1 : 0];
    if (!dy.defined()) dy = at::zeros_like(h);
    dy = dy.contiguous();
    if (dh.defined()) dh = dh.contiguous();
    const int64_t C = h.size(-1), N = h.numel() / C;
    at::Tensor dx = at::empty_like(h);
    at::Tensor dw, db;
    if (h.is_cuda()) {
      const int64_t parts = kernels::add_norm_partial_rows(N);
      const auto opts = h.options().dtype(at::kFloat);
      at::Tensor dw_part = at::empty({parts, C}, opts);
      at::Tensor db_part = has_bias ? at::empty({parts, C}, opts) : at::Tensor();
      const auto t = fused::element_type(h);
      kernels::add_norm_backward_cuda(
          h.data_ptr(), w.data_ptr<float>(), mean.data_ptr<float>(), rstd.data_ptr<float>(),
          dy.data_ptr(), fused::data_or_null(dh), N, C, rms, {t, t, fused::element_type(dy)},
          dx.data_ptr(), dw_part.data_ptr<float>(), has_bias ? db_part.data_ptr<float>() : nullptr,
          fused::current_stream(h));
      dw = dw_part.sum(0);
      if (has_bias) db = db_part.sum(0);
    } else {
      const at::Tensor hf = fused::cpu_floats(h), dyf = fused::cpu_floats(dy),
                       dhf = fused::cpu_floats(dh);
      at::Tensor dxf = at::empty({N, C}, at::kFloat);
      dw = at::zeros({C}, at::kFloat);
      if (has_bias) db = at::zeros({C}, at::kFloat);
      kernels::add_norm_backward_reference(
          hf.data_ptr<float>(), w.data_ptr<float>(), mean.data_ptr<float>(), rstd.data_ptr<float>(),
          dyf.data_ptr<float>(), fused::floats_or_null(dhf), N, C, rms,
          h.scalar_type() == at::kBFloat16, dxf.data_ptr<float>(), dw.data_ptr<float>(),
          has_bias ? db.data_ptr<float>() : nullptr);
      dx.copy_(dxf.view(h.sizes()));
    }
    const auto weight_dtype = ctx->saved_data["weight_dtype"].toScalarType();
    at::Tensor ddelta;
    if (has_delta) ddelta = dx.to(ctx->saved_data["delta_dtype"].toScalarType());
    return {dx,
            ddelta,
            dw.to(weight_dtype),
            has_bias ? db.to(weight_dtype) : at::Tensor(),
            at::Tensor(),
            at::Tensor(),
            at::Tensor()};
  }
};

// y's type: x's, or under a bf16 autocast of x's device bf16 already: the linear layer that
// reads y would cast it to bf16 first (a pass that reads fp32 and writes bf16), so the kernel
// stores it so. (An MoE router, which computes in fp32, then sees bf16-rounded inputs.)
at::ScalarType output_dtype(const at::Tensor& x) {
  const auto type = x.device().type();
  if (x.scalar_type() == at::kFloat && at::autocast::is_autocast_enabled(type) &&
      at::autocast::get_autocast_dtype(type) == at::kBFloat16)
    return at::kBFloat16;
  return x.scalar_type();
}

}  // namespace

at::Tensor norm_unfused(const at::Tensor& h, const at::Tensor& weight, const at::Tensor& bias,
                        bool rms, double eps) {
  if (rms) {  // in fp32 like HF's LlamaRMSNorm, back to h's type before the weight
    auto hf = h.to(at::kFloat);
    auto y = hf * at::rsqrt(hf.pow(2).mean(-1, /*keepdim=*/true) + eps);
    return weight * y.to(h.scalar_type());
  }
  // A bf16 h with fp32 parameters outside autocast: the CPU's layer_norm takes the mix (fp32
  // math, h's type out), libtorch's CUDA kernel refuses it (seen on an H100, 2026-11-27). Do the
  // same math explicitly there. Under autocast layer_norm runs in fp32 anyway: left as it is.
  if (h.is_cuda() && weight.defined() && weight.scalar_type() != h.scalar_type() &&
      !at::autocast::is_autocast_enabled(at::kCUDA))
    return at::layer_norm(h.to(weight.scalar_type()), {h.size(-1)}, weight, bias, eps, true)
        .to(h.scalar_type());
  return at::layer_norm(h, {h.size(-1)}, weight, bias, eps, /*cudnn_enable=*/true);
}

bool add_norm_fused(const at::Tensor& x, const at::Tensor& delta) {
  if (!kernels::fused_kernel_enabled(kernels::FusedKernel::kAddNorm, x.is_cuda())) return false;
  if (!fused::kernel_type(x) || x.numel() == 0) return false;
  if (!delta.defined()) return true;
  // h takes x's type: a bf16 x with an fp32 delta would promote to fp32 in libtorch.
  return fused::kernel_type(delta) && delta.sizes() == x.sizes() && delta.device() == x.device() &&
         !(x.scalar_type() == at::kBFloat16 && delta.scalar_type() == at::kFloat);
}

AddNormOutput add_norm(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& weight,
                       const at::Tensor& bias, bool rms, double eps) {
  if (add_norm_fused(x, delta)) {
    auto out = AddNormFunction::apply(x, fused::absent_as_empty(delta, x), weight,
                                      fused::absent_as_empty(rms ? at::Tensor() : bias, weight),
                                      rms, eps, output_dtype(x));
    if (delta.defined()) return {out[0], out[1]};
    return {x, out[0]};
  }
  at::Tensor h = delta.defined() ? x + delta : x;
  return {h, norm_unfused(h, weight, bias, rms, eps)};
}

}  // namespace lmtrain::model
