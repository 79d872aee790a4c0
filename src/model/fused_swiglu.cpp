#include "model/fused_swiglu.h"

#include <torch/csrc/autograd/custom_function.h>

#include "kernels/fused_reference.h"
#include "kernels/kernel_switch.h"
#include "model/fused_kernel_call.h"

namespace lmtrain::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

std::vector<int64_t> with_last(at::IntArrayRef sizes, int64_t last) {
  std::vector<int64_t> out(sizes.begin(), sizes.end());
  out.back() = last;
  return out;
}

class SwiGluFunction : public torch::autograd::Function<SwiGluFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& h_in, int64_t hidden) {
    const at::Tensor h = h_in.contiguous();
    const int64_t N = h.numel() / (2 * hidden);
    at::Tensor y = at::empty(with_last(h.sizes(), hidden), h.options());
    if (h.is_cuda()) {
      kernels::swiglu_forward_cuda(h.data_ptr(), N, hidden, fused::element_type(h), y.data_ptr(),
                                   fused::current_stream(h));
    } else {
      const at::Tensor hf = fused::cpu_floats(h);
      at::Tensor yf = at::empty(y.sizes(), hf.options());
      kernels::swiglu_forward_reference(hf.data_ptr<float>(), N, hidden,
                                        h.scalar_type() == at::kBFloat16, yf.data_ptr<float>());
      y.copy_(yf);
    }
    ctx->save_for_backward({h});
    ctx->saved_data["hidden"] = hidden;
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor h = ctx->get_saved_variables()[0];
    const int64_t hidden = ctx->saved_data["hidden"].toInt();
    const int64_t N = h.numel() / (2 * hidden);
    const at::Tensor dy = grads[0].contiguous();
    at::Tensor dh = at::empty_like(h);
    if (h.is_cuda()) {
      kernels::swiglu_backward_cuda(h.data_ptr(), dy.data_ptr(), N, hidden, fused::element_type(h),
                                    dh.data_ptr(), fused::current_stream(h));
    } else {
      const at::Tensor hf = fused::cpu_floats(h), dyf = fused::cpu_floats(dy);
      at::Tensor dhf = at::empty(h.sizes(), hf.options());
      kernels::swiglu_backward_reference(hf.data_ptr<float>(), dyf.data_ptr<float>(), N, hidden,
                                         h.scalar_type() == at::kBFloat16, dhf.data_ptr<float>());
      dh.copy_(dhf);
    }
    return {dh, at::Tensor()};
  }
};

}  // namespace

at::Tensor swiglu_unfused(const at::Tensor& h, int64_t hidden) {
  return at::silu(h.narrow(-1, 0, hidden)) * h.narrow(-1, hidden, hidden);
}

at::Tensor swiglu(const at::Tensor& h, int64_t hidden) {
  if (kernels::fused_kernel_enabled(kernels::FusedKernel::kSwiGlu, h.is_cuda()) &&
      fused::kernel_type(h) && h.size(-1) == 2 * hidden) {
    return SwiGluFunction::apply(h, hidden);
  }
  return swiglu_unfused(h, hidden);
}

}  // namespace lmtrain::model
