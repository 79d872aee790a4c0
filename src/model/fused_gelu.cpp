#include "model/fused_gelu.h"

#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include "kernels/cpu_kernels.h"
#include "kernels/kernel_switch.h"

namespace lmtrain::model {
namespace {

constexpr int64_t kGrain = 16384;  // elements per task: large enough to amortise the fork

class GeluTanh : public torch::autograd::Function<GeluTanh> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x_in) {
    const at::Tensor x = x_in.contiguous();
    at::Tensor y = at::empty_like(x);
    const float* xp = x.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    at::parallel_for(0, x.numel(), kGrain, [&](int64_t begin, int64_t end) {
      kernels::gelu_tanh_forward(xp + begin, yp + begin, end - begin);
    });
    ctx->save_for_backward({x});
    return y;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const at::Tensor x = ctx->get_saved_variables()[0];
    const at::Tensor dy = grads[0].contiguous();
    at::Tensor dx = at::empty_like(x);
    const float* xp = x.data_ptr<float>();
    const float* dyp = dy.data_ptr<float>();
    float* dxp = dx.data_ptr<float>();
    at::parallel_for(0, x.numel(), kGrain, [&](int64_t begin, int64_t end) {
      kernels::gelu_tanh_backward(xp + begin, dyp + begin, dxp + begin, end - begin);
    });
    return {dx};
  }
};

}  // namespace

at::Tensor gelu_tanh(const at::Tensor& x) {
  if (kernels::fused_cpu_kernels_enabled() && x.device().is_cpu() &&
      x.scalar_type() == at::kFloat) {
    return GeluTanh::apply(x);
  }
  return at::gelu(x, "tanh");
}

}  // namespace lmtrain::model
