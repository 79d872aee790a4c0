#include "model/fp8_linear.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <string>

#include "core/runtime.h"
#include "model/gpt.h"
#include "model/layers.h"

namespace lmtrain::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr int64_t kAlign = 16;  // the fp8 GEMMs want every dimension a multiple of 16

double fp8_max(at::ScalarType t) { return t == at::kFloat8_e5m2 ? 57344.0 : 448.0; }

// (M, K) -> (M rounded up to 16, K) with zero rows: zero rows add nothing to dW and their dx
// rows are dropped.
at::Tensor pad_rows(const at::Tensor& t) {
  const int64_t pad = (kAlign - t.size(0) % kAlign) % kAlign;
  return pad == 0 ? t : at::constant_pad_nd(t, {0, 0, 0, pad});
}

// `t` as the second operand of _scaled_mm wants it: the same matrix, column-major.
at::Tensor column_major(const at::Tensor& t) { return t.t().contiguous().t(); }

class Fp8Linear : public torch::autograd::Function<Fp8Linear> {
 public:
  // x2 (M, K) with M a multiple of 16, w (N, K), bias (N) or empty (custom functions take no
  // undefined input) -> (M, N) bf16.
  // `split` (or null) outlives the graph (fp8_linear's contract): kept as an address.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x2, const at::Tensor& w,
                            const at::Tensor& bias, const Fp8Split* split) {
    const Fp8Tensor xq = quantize_fp8(x2, at::kFloat8_e4m3fn, split ? split->x : nullptr);
    const Fp8Tensor wq = quantize_fp8(w, at::kFloat8_e4m3fn, split ? split->w : nullptr);
    const bool partial_y = split && split->partial_y;
    at::Tensor y = at::_scaled_mm(xq.data, wq.data.t(), xq.inv_scale, wq.inv_scale,
                                  /*bias=*/std::nullopt, /*scale_result=*/std::nullopt,
                                  partial_y ? at::kFloat : at::kBFloat16);  // (M, N)
    const bool has_bias = bias.numel() > 0;
    if (has_bias) y = y + bias.to(y.scalar_type());
    ctx->save_for_backward({xq.data, xq.inv_scale, wq.data, wq.inv_scale});
    ctx->saved_data["split"] = static_cast<int64_t>(reinterpret_cast<intptr_t>(split));
    ctx->saved_data["x_dtype"] = x2.scalar_type();
    ctx->saved_data["w_dtype"] = w.scalar_type();
    ctx->saved_data["has_bias"] = has_bias;
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &xq = saved[0], &x_inv = saved[1], &wq = saved[2], &w_inv = saved[3];
    const auto* split =
        reinterpret_cast<const Fp8Split*>(static_cast<intptr_t>(ctx->saved_data["split"].toInt()));
    const at::Tensor dy = grads[0].contiguous();  // (M, N)
    const Fp8Tensor dyq = quantize_fp8(dy, at::kFloat8_e5m2, split ? split->dy : nullptr);
    // dx = dy W: (M, N) x (N, K); in fp32 when the caller sums it over ranks before rounding.
    const bool partial_dx = split && split->partial_dx;
    at::Tensor dx = at::_scaled_mm(dyq.data, column_major(wq), dyq.inv_scale, w_inv, std::nullopt,
                                   std::nullopt, partial_dx ? at::kFloat : at::kBFloat16);
    // dW = dy^T x: (N, M) x (M, K), accumulated in fp32 for the fp32 master weights.
    at::Tensor dw = at::_scaled_mm(dyq.data.t().contiguous(), column_major(xq), dyq.inv_scale,
                                   x_inv, std::nullopt, std::nullopt, at::kFloat);
    at::Tensor db;
    if (ctx->saved_data["has_bias"].toBool()) db = dy.sum(0, false, at::kFloat);
    const auto w_dtype = ctx->saved_data["w_dtype"].toScalarType();
    if (!partial_dx) dx = dx.to(ctx->saved_data["x_dtype"].toScalarType());
    return {dx, dw.to(w_dtype), db.defined() ? db.to(w_dtype) : db, at::Tensor()};
  }
};

}  // namespace

Fp8Tensor quantize_fp8(const at::Tensor& t, at::ScalarType fp8_type,
                       const Fp8AmaxOfWhole& amax_of_whole) {
  const double fmax = fp8_max(fp8_type);
  // amax(|t|) from one min/max pass over t in its own dtype: negation and max are exact in every
  // float format, so this equals the amax of |t| in fp32 without writing |t| or an fp32 copy
  // first (two fewer passes over (M, K) per operand; the GPU run of 2026-11-28 had fp8 at 0.45x
  // bf16's speed on GPT-2 124M). 1 for an all-zero tensor (any scale represents it); the scale
  // stays on the device.
  const auto [lo, hi] = at::aminmax(t);
  at::Tensor amax = at::maximum(lo.neg(), hi).to(at::kFloat);
  if (amax_of_whole) amax = amax_of_whole(amax);
  const at::Tensor inv_scale = at::where(amax > 0, amax / fmax, at::ones_like(amax));
  // The quotient in fp32 (a bf16 quotient would round twice), clamped in place: at::div makes a
  // new tensor, so fp32 master weights (t.to(kFloat) is t itself) are never written.
  at::Tensor scaled = at::div(t.to(at::kFloat), inv_scale);
  scaled.clamp_(-fmax, fmax);
  return {scaled.to(fp8_type), inv_scale};
}

bool fp8_linear_supported(const at::Tensor& x, const at::Tensor& w) {
  return w.dim() == 2 && x.dim() >= 1 && x.numel() > 0 && x.size(-1) == w.size(1) &&
         w.size(0) % kAlign == 0 && w.size(1) % kAlign == 0 &&
         at::isFloatingType(x.scalar_type()) && x.device() == w.device() &&
         (x.device().is_cpu() || core::device_has_fp8(x.device()));
}

at::Tensor fp8_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias,
                      const Fp8Split* split) {
  const int64_t K = x.size(-1), M = x.numel() / K;
  const at::Tensor x2 = pad_rows(x.reshape({M, K}));
  at::Tensor y =
      Fp8Linear::apply(x2, w, bias.defined() ? bias : at::empty({0}, w.options()), split);
  if (y.size(0) != M) y = y.narrow(0, 0, M);
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = w.size(0);
  return y.view(shape);
}

int64_t use_fp8_block_linears(GptImpl& model) {
  int64_t switched = 0;
  for (const auto& item : model.named_modules()) {
    auto* linear = dynamic_cast<LinearImpl*>(item.value().get());
    const std::string& name = item.key();
    if (!linear || name.rfind("transformer.h.", 0) != 0) continue;
    if (name.find("router") != std::string::npos || name.find("lora_") != std::string::npos)
      continue;
    linear->fp8 = true;
    ++switched;
  }
  return switched;
}

}  // namespace lmtrain::model
