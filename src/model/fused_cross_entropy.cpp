#include "model/fused_cross_entropy.h"

#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>

#include "core/error.h"
#include "core/log.h"
#include "kernels/cpu_kernels.h"
#include "kernels/kernel_switch.h"

namespace lmtrain::model {
namespace {

class FusedLinearCrossEntropy : public torch::autograd::Function<FusedLinearCrossEntropy> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x_in,
                            const at::Tensor& weight, const at::Tensor& targets_in) {
    const at::Tensor x = x_in.contiguous();
    const at::Tensor targets = targets_in.contiguous();
    const int64_t N = x.size(0), V = weight.size(0);
    if (N > 0) {
      const int64_t lo = targets.min().item<int64_t>(), hi = targets.max().item<int64_t>();
      if (lo < 0 || hi >= V) {
        throw Error(log::format("cross-entropy target %lld is outside the vocabulary [0, %lld)",
                                (long long)(lo < 0 ? lo : hi), (long long)V));
      }
    }
    // (V, N): the logits transposed, then exp(logit - column max) in place. This layout makes
    // both passes' large GEMMs faster than x W^T (N, V) does (kernels/cpu_kernels.h).
    at::Tensor exps = at::mm(weight, x.t());
    at::Tensor loss_rows = at::empty({N}, x.options());
    at::Tensor inv_sum = at::empty({N}, x.options());
    float* e = exps.data_ptr<float>();
    const int64_t* t = targets.data_ptr<int64_t>();
    float* l = loss_rows.data_ptr<float>();
    float* inv = inv_sum.data_ptr<float>();
    const int64_t blocks = (N + 15) / 16;  // the kernel's 16-column blocks
    at::parallel_for(0, blocks, 1, [&](int64_t begin, int64_t end) {
      const int64_t c0 = begin * 16, c1 = std::min(N, end * 16);
      kernels::softmax_xent_cols(e + c0, V, c1 - c0, N, t + c0, l + c0, inv + c0);
    });
    ctx->save_for_backward({x, weight, exps, inv_sum, targets});
    // Sum in double: N can be large and the mean is what gets logged and compared.
    return (loss_rows.sum(at::kDouble) / static_cast<double>(N)).to(at::kFloat);
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &weight = saved[1], &exps = saved[2], &inv_sum = saved[3],
                     &targets = saved[4];
    const int64_t N = x.size(0);
    // Scalar g / N as a 0-dim tensor (no host sync). It is folded into the (N, C) operands and
    // the (N,) row scale, so no extra pass runs over the (V, C) weight gradient.
    const at::Tensor g = grads[0].to(at::kFloat) / static_cast<double>(N);
    const at::Tensor row_scale = (inv_sum * g).unsqueeze(1);  // (N, 1): g/N / sum
    at::Tensor dx, dw;
    if (ctx->needs_input_grad(0)) {
      // dx = g/N (diag(1/sum) (E W) - W[target])
      dx = at::mm(exps.t(), weight).mul_(row_scale).sub_(weight.index_select(0, targets).mul_(g));
    }
    if (ctx->needs_input_grad(1)) {
      // dW = g/N (E^T (diag(1/sum) x) - onehot^T x)
      dw = at::mm(exps, x * row_scale);
      dw.index_add_(0, targets, x * g.neg());
    }
    return {dx, dw, at::Tensor()};
  }
};

}  // namespace

bool fused_cross_entropy_supported(const at::Tensor& x, const at::Tensor& weight) {
  // Under CPU autocast (bf16) the head's matmul belongs in the compute dtype: libtorch's path.
  return kernels::fused_cpu_kernels_enabled() && !at::autocast::is_autocast_enabled(at::kCPU) &&
         x.device().is_cpu() && weight.device().is_cpu() && x.scalar_type() == at::kFloat &&
         weight.scalar_type() == at::kFloat && x.dim() >= 2 && weight.dim() == 2;
}

at::Tensor fused_linear_cross_entropy(const at::Tensor& x, const at::Tensor& weight,
                                      const at::Tensor& targets) {
  return FusedLinearCrossEntropy::apply(x, weight, targets);
}

}  // namespace lmtrain::model
