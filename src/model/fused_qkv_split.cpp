#include "model/fused_qkv_split.h"

#include <torch/csrc/autograd/custom_function.h>

#include "kernels/fused_reference.h"
#include "kernels/kernel_switch.h"
#include "model/fused_add_norm.h"
#include "model/fused_kernel_call.h"
#include "model/rope.h"

namespace lmtrain::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Inputs packed, q_w, k_w (or both empty), cos, sin (or both empty); outputs {q, k, v}.
class QkvSplitFunction : public torch::autograd::Function<QkvSplitFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& packed_in,
                               const at::Tensor& q_weight, const at::Tensor& k_weight,
                               const at::Tensor& cos, const at::Tensor& sin, int64_t n_head,
                               int64_t n_kv_head, double eps) {
    const at::Tensor packed = packed_in.contiguous();
    const int64_t B = packed.size(0), T = packed.size(1),
                  D = packed.size(2) / (n_head + 2 * n_kv_head);
    const kernels::QkvShape s{B, T, n_head, n_kv_head, D};
    const bool norm = fused::present(q_weight);
    const at::Tensor q_w = norm ? q_weight.to(at::kFloat).contiguous() : at::Tensor();
    const at::Tensor k_w = norm ? k_weight.to(at::kFloat).contiguous() : at::Tensor();
    at::Tensor q = at::empty({B, n_head, T, D}, packed.options());
    at::Tensor k = at::empty({B, n_kv_head, T, D}, packed.options());
    at::Tensor v = at::empty({B, n_kv_head, T, D}, packed.options());
    at::Tensor rstd =
        norm ? at::empty({B, T, n_head + n_kv_head}, packed.options().dtype(at::kFloat))
             : at::Tensor();
    if (packed.is_cuda()) {
      kernels::qkv_split_forward_cuda(
          packed.data_ptr(), fused::floats_or_null(q_w), fused::floats_or_null(k_w),
          fused::floats_or_null(cos), fused::floats_or_null(sin), s, static_cast<float>(eps),
          fused::element_type(packed), q.data_ptr(), k.data_ptr(), v.data_ptr(),
          norm ? rstd.data_ptr<float>() : nullptr, fused::current_stream(packed));
    } else {
      const at::Tensor pf = fused::cpu_floats(packed);
      at::Tensor qf = at::empty(q.sizes(), pf.options()), kf = at::empty(k.sizes(), pf.options()),
                 vf = at::empty(v.sizes(), pf.options());
      kernels::qkv_split_forward_reference(
          pf.data_ptr<float>(), fused::floats_or_null(q_w), fused::floats_or_null(k_w),
          fused::floats_or_null(cos), fused::floats_or_null(sin), s, static_cast<float>(eps),
          packed.scalar_type() == at::kBFloat16, qf.data_ptr<float>(), kf.data_ptr<float>(),
          vf.data_ptr<float>(), norm ? rstd.data_ptr<float>() : nullptr);
      q.copy_(qf);
      k.copy_(kf);
      v.copy_(vf);
    }
    ctx->save_for_backward({packed, fused::absent_as_empty(q_w, packed),
                            fused::absent_as_empty(k_w, packed), cos, sin,
                            fused::absent_as_empty(rstd, packed)});
    ctx->saved_data["n_head"] = n_head;
    ctx->saved_data["n_kv_head"] = n_kv_head;
    ctx->saved_data["weight_dtype"] = norm ? q_weight.scalar_type() : at::kFloat;
    return {q, k, v};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &packed = saved[0], &q_w = saved[1], &k_w = saved[2], &cos = saved[3],
                     &sin = saved[4], &rstd = saved[5];
    const int64_t H = ctx->saved_data["n_head"].toInt(), K = ctx->saved_data["n_kv_head"].toInt();
    const int64_t B = packed.size(0), T = packed.size(1), D = packed.size(2) / (H + 2 * K);
    const kernels::QkvShape s{B, T, H, K, D};
    const bool norm = fused::present(q_w);
    auto grad_or_zeros = [](const at::Tensor& g, at::IntArrayRef sizes, const at::Tensor& like) {
      return g.defined() ? g.contiguous() : at::zeros(sizes, like.options());
    };
    const at::Tensor dq = grad_or_zeros(grads[0], {B, H, T, D}, packed);
    const at::Tensor dk = grad_or_zeros(grads[1], {B, K, T, D}, packed);
    const at::Tensor dv = grad_or_zeros(grads[2], {B, K, T, D}, packed);
    at::Tensor dpacked = at::empty_like(packed);
    at::Tensor dq_w, dk_w;
    if (packed.is_cuda()) {
      at::Tensor dw_part;
      if (norm)
        dw_part = at::empty({kernels::qkv_norm_partial_rows(B * T), 2, D},
                            packed.options().dtype(at::kFloat));
      kernels::qkv_split_backward_cuda(
          packed.data_ptr(), fused::floats_or_null(q_w), fused::floats_or_null(k_w),
          fused::floats_or_null(cos), fused::floats_or_null(sin), s, fused::floats_or_null(rstd),
          dq.data_ptr(), dk.data_ptr(), dv.data_ptr(), fused::element_type(packed),
          dpacked.data_ptr(), norm ? dw_part.data_ptr<float>() : nullptr,
          fused::current_stream(packed));
      if (norm) {
        const at::Tensor dw = dw_part.sum(0);  // (2, D)
        dq_w = dw[0];
        dk_w = dw[1];
      }
    } else {
      const at::Tensor pf = fused::cpu_floats(packed), dqf = fused::cpu_floats(dq),
                       dkf = fused::cpu_floats(dk), dvf = fused::cpu_floats(dv);
      at::Tensor dpf = at::empty(packed.sizes(), pf.options());
      if (norm) {
        dq_w = at::zeros({D}, pf.options());
        dk_w = at::zeros({D}, pf.options());
      }
      kernels::qkv_split_backward_reference(
          pf.data_ptr<float>(), fused::floats_or_null(q_w), fused::floats_or_null(k_w),
          fused::floats_or_null(cos), fused::floats_or_null(sin), s, fused::floats_or_null(rstd),
          dqf.data_ptr<float>(), dkf.data_ptr<float>(), dvf.data_ptr<float>(),
          packed.scalar_type() == at::kBFloat16, dpf.data_ptr<float>(),
          norm ? dq_w.data_ptr<float>() : nullptr, norm ? dk_w.data_ptr<float>() : nullptr);
      dpacked.copy_(dpf);
    }
    const auto weight_dtype = ctx->saved_data["weight_dtype"].toScalarType();
    if (norm) {
      dq_w = dq_w.to(weight_dtype);
      dk_w = dk_w.to(weight_dtype);
    }
    return {dpacked,      dq_w,         dk_w,         at::Tensor(),
            at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

QkvHeads qkv_split_unfused(const at::Tensor& packed, const QkvSplitSpec& spec) {
  const int64_t B = packed.size(0), T = packed.size(1), H = spec.n_head, K = spec.n_kv_head,
                D = spec.head_dim;
  at::Tensor q = packed.narrow(2, 0, H * D).view({B, T, H, D});
  at::Tensor k = packed.narrow(2, H * D, K * D).view({B, T, K, D});
  at::Tensor v = packed.narrow(2, (H + K) * D, K * D).view({B, T, K, D}).transpose(1, 2);
  if (spec.q_norm_weight.defined()) {  // Qwen3: RMSNorm over each head's D, before the rotation
    q = norm_unfused(q, spec.q_norm_weight, at::Tensor(), /*rms=*/true, spec.norm_eps);
    k = norm_unfused(k, spec.k_norm_weight, at::Tensor(), /*rms=*/true, spec.norm_eps);
  }
  q = q.transpose(1, 2);
  k = k.transpose(1, 2);
  if (spec.rope) {
    q = apply_rope(q, 0, spec.rope_params);
    k = apply_rope(k, 0, spec.rope_params);
  }
  return {q, k, v};
}

QkvHeads qkv_split(const at::Tensor& packed, const QkvSplitSpec& spec) {
  const bool fused =
      kernels::fused_kernel_enabled(kernels::FusedKernel::kQkvSplit, packed.is_cuda()) &&
      fused::kernel_type(packed) && packed.dim() == 3 && packed.numel() > 0 &&
      spec.head_dim % 2 == 0 &&
      packed.size(2) == (spec.n_head + 2 * spec.n_kv_head) * spec.head_dim;
  if (!fused) return qkv_split_unfused(packed, spec);
  at::Tensor cos, sin;
  if (spec.rope)
    std::tie(cos, sin) =
        rope_half_tables(packed.size(1), spec.head_dim, spec.rope_params, packed.device());
  auto out = QkvSplitFunction::apply(
      packed, fused::absent_as_empty(spec.q_norm_weight, packed),
      fused::absent_as_empty(spec.k_norm_weight, packed), fused::absent_as_empty(cos, packed),
      fused::absent_as_empty(sin, packed), spec.n_head, spec.n_kv_head, spec.norm_eps);
  return {out[0], out[1], out[2]};
}

}  // namespace lmtrain::model
