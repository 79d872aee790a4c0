#include "model/fused_moe_rows.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "kernels/kernel_switch.h"
#include "kernels/moe_rows_cuda.h"
#include "kernels/moe_rows_reference.h"
#include "model/fused_kernel_call.h"

namespace lmtrain::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

bool bf16(at::ScalarType t) { return t == at::kBFloat16; }

// rows = flat[slot / k] in `rows_type`; dflat[n] = sum_j drows[inv[n, j]].
class MoePermuteFunction : public torch::autograd::Function<MoePermuteFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& flat_in,
                            const at::Tensor& slot_in, const at::Tensor& inv, int64_t k,
                            at::ScalarType rows_type) {
    const at::Tensor flat = flat_in.contiguous(), slot = slot_in.contiguous();
    const int64_t M = slot.size(0), C = flat.size(1);
    at::Tensor rows = at::empty({M, C}, flat.options().dtype(rows_type));
    if (flat.is_cuda()) {
      kernels::moe_permute_forward_cuda(
          flat.data_ptr(), slot.data_ptr<int64_t>(), M, k, C,
          {fused::element_type(flat.scalar_type()), fused::element_type(rows_type)},
          rows.data_ptr(), fused::current_stream(flat));
    } else {
      const at::Tensor xf = fused::cpu_floats(flat);
      at::Tensor rf = at::empty({M, C}, xf.options());
      if (M > 0 && C > 0) {
        kernels::moe_permute_forward_reference(xf.data_ptr<float>(), slot.data_ptr<int64_t>(), M, k,
                                               C, rf.data_ptr<float>());
      }
      rows.copy_(rf);
    }
    ctx->save_for_backward({inv});
    ctx->saved_data["k"] = k;
    ctx->saved_data["tokens"] = flat.size(0);
    ctx->saved_data["flat_type"] = static_cast<int64_t>(flat.scalar_type());
    return rows;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor inv = ctx->get_saved_variables()[0];
    const int64_t k = ctx->saved_data["k"].toInt(), N = ctx->saved_data["tokens"].toInt();
    const auto flat_type = static_cast<at::ScalarType>(ctx->saved_data["flat_type"].toInt());
    const at::Tensor drows = grads[0].contiguous();
    const int64_t C = drows.size(1);
    at::Tensor dx = at::empty({N, C}, drows.options().dtype(flat_type));
    if (drows.is_cuda()) {
      kernels::moe_permute_backward_cuda(
          drows.data_ptr(), inv.data_ptr<int64_t>(), N, k, C,
          {fused::element_type(flat_type), fused::element_type(drows.scalar_type())}, dx.data_ptr(),
          fused::current_stream(drows));
    } else {
      const at::Tensor df = fused::cpu_floats(drows);
      at::Tensor dxf = at::zeros({N, C}, df.options());
      if (N > 0 && C > 0) {
        kernels::moe_permute_backward_reference(df.numel() > 0 ? df.data_ptr<float>() : nullptr,
                                                inv.data_ptr<int64_t>(), N, k, C, bf16(flat_type),
                                                dxf.data_ptr<float>());
      }
      dx.copy_(dxf);
    }
    return {dx, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// y[n] = sum_j w[n, j] out_rows[inv[n, j]] in `y_type`; backward: d out_rows and dw.
class MoeCombineFunction : public torch::autograd::Function<MoeCombineFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& out_in, const at::Tensor& w_in,
                            const at::Tensor& inv, at::ScalarType y_type) {
    const at::Tensor out = out_in.contiguous(), w = w_in.contiguous();
    const int64_t N = w.size(0), k = w.size(1), C = out.size(1);
    at::Tensor y = at::empty({N, C}, out.options().dtype(y_type));
    if (out.is_cuda()) {
      kernels::moe_combine_forward_cuda(
          out.data_ptr(), w.data_ptr<float>(), inv.data_ptr<int64_t>(), N, k, C,
          {fused::element_type(y_type), fused::element_type(out.scalar_type())}, y.data_ptr(),
          fused::current_stream(out));
    } else {
      const at::Tensor of = fused::cpu_floats(out);
      at::Tensor yf = at::zeros({N, C}, w.options());
      if (N > 0 && C > 0) {
        kernels::moe_combine_forward_reference(of.numel() > 0 ? of.data_ptr<float>() : nullptr,
                                               w.data_ptr<float>(), inv.data_ptr<int64_t>(), N, k,
                                               C, bf16(y_type), yf.data_ptr<float>());
      }
      y.copy_(yf);
    }
    ctx->save_for_backward({out, w, inv});
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& out = saved[0];
    const at::Tensor& w = saved[1];
    const at::Tensor& inv = saved[2];
    const int64_t N = w.size(0), k = w.size(1), M = out.size(0), C = out.size(1);
    const at::Tensor dy = grads[0].contiguous();
    at::Tensor d_out = at::empty({M, C}, out.options());
    at::Tensor dw = at::empty({N, k}, w.options());
    if (out.is_cuda()) {
      kernels::moe_combine_backward_cuda(
          out.data_ptr(), w.data_ptr<float>(), inv.data_ptr<int64_t>(), dy.data_ptr(), N, k, C,
          {fused::element_type(dy.scalar_type()), fused::element_type(out.scalar_type())},
          d_out.data_ptr(), dw.data_ptr<float>(), fused::current_stream(out));
    } else {
      const at::Tensor of = fused::cpu_floats(out), dyf = fused::cpu_floats(dy);
      at::Tensor df = at::empty({M, C}, w.options());
      if (N > 0) {
        kernels::moe_combine_backward_reference(
            of.numel() > 0 ? of.data_ptr<float>() : nullptr, w.data_ptr<float>(),
            inv.data_ptr<int64_t>(), dyf.numel() > 0 ? dyf.data_ptr<float>() : nullptr, N, k, C,
            bf16(out.scalar_type()), df.numel() > 0 ? df.data_ptr<float>() : nullptr,
            dw.data_ptr<float>());
      }
      d_out.copy_(df);
    }
    return {d_out, dw, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor moe_inverse_rows(const DispatchPlan& plan, int64_t assignments) {
  const auto& slot = plan.slot;
  // Slots are distinct, so the copy is a permutation's inverse: no two writes meet.
  return at::full({assignments}, -1, slot.options())
      .index_copy_(0, slot, at::arange(slot.size(0), slot.options()));
}

bool moe_permute_fused(const at::Tensor& flat) {
  return kernels::fused_kernel_enabled(kernels::FusedKernel::kMoeRows, flat.is_cuda()) &&
         flat.dim() == 2 && fused::kernel_type(flat) &&
         fused::kernel_dtype(fused::compute_dtype(flat));
}

bool moe_combine_fused(const at::Tensor& out_rows, const at::Tensor& weight, at::ScalarType dtype) {
  return kernels::fused_kernel_enabled(kernels::FusedKernel::kMoeRows, out_rows.is_cuda()) &&
         out_rows.dim() == 2 && fused::kernel_type(out_rows) && fused::kernel_dtype(dtype) &&
         weight.dim() == 2 && weight.scalar_type() == at::kFloat &&
         weight.device() == out_rows.device();
}

at::Tensor moe_permute_unfused(const at::Tensor& flat, const DispatchPlan& plan) {
  return flat.index_select(0, plan.token);
}

at::Tensor moe_combine_unfused(const at::Tensor& out_rows, const at::Tensor& weight,
                               const DispatchPlan& plan, at::ScalarType dtype) {
  const int64_t N = weight.size(0), k = weight.size(1), C = out_rows.size(1);
  // Each kept assignment writes its weighted output into its own (token, slot) row, then the k
  // slots of a token are summed in slot order (deterministic, no atomics).
  auto weights = weight.reshape({-1}).index_select(0, plan.slot).unsqueeze(1);  // (M, 1)
  auto weighted = (out_rows.to(at::kFloat) * weights).to(dtype);
  auto per_slot = at::zeros({N * k, C}, weighted.options()).index_copy(0, plan.slot, weighted);
  return per_slot.view({N, k, C}).sum(1);  // (N, C)
}

at::Tensor moe_permute(const at::Tensor& flat, const DispatchPlan& plan, int64_t top_k) {
  if (!moe_permute_fused(flat)) return moe_permute_unfused(flat, plan);
  return MoePermuteFunction::apply(flat, plan.slot, moe_inverse_rows(plan, flat.size(0) * top_k),
                                   top_k, fused::compute_dtype(flat));
}

at::Tensor moe_combine(const at::Tensor& out_rows, const at::Tensor& weight,
                       const DispatchPlan& plan, at::ScalarType dtype) {
  if (!moe_combine_fused(out_rows, weight, dtype)) {
    return moe_combine_unfused(out_rows, weight, plan, dtype);
  }
  return MoeCombineFunction::apply(out_rows, weight,
                                   moe_inverse_rows(plan, weight.size(0) * weight.size(1)), dtype);
}

}  // namespace lmtrain::model
