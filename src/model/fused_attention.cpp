#include "model/fused_attention.h"

#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <vector>

#include "kernels/cpu_kernels.h"
#include "kernels/kernel_switch.h"
#include "model/fused_attention_shape.h"

namespace lmtrain::model {
namespace {

// P: (B, H, T, T) attention probabilities (lower triangle), y: (B, T, C).
void attention_forward(const at::Tensor& qkv, const FusedAttentionShape& s, at::Tensor& P,
                       at::Tensor& y) {
  const float* base = qkv.data_ptr<float>();
  float* pbase = P.data_ptr<float>();
  float* ybase = y.data_ptr<float>();
  const int64_t row = 3 * s.C;
  at::parallel_for(0, s.B * s.H, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch(kernels::attention_scratch_floats(s.T, s.D));
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / s.H, h = bh % s.H;
      const float* q = base + b * s.T * row + h * s.D;
      kernels::attention_forward_head(q, q + s.C, q + 2 * s.C, row, s.T, s.D, s.scale,
                                      pbase + bh * s.T * s.T, ybase + b * s.T * s.C + h * s.D, s.C,
                                      scratch.data());
    }
  });
}

at::Tensor attention_backward(const at::Tensor& qkv, const at::Tensor& P, const at::Tensor& y,
                              const at::Tensor& dy_in, const FusedAttentionShape& s) {
  auto dy = dy_in.contiguous();
  auto dqkv = at::empty_like(qkv);
  const float* base = qkv.data_ptr<float>();
  const float* pbase = P.data_ptr<float>();
  const float* ybase = y.data_ptr<float>();
  const float* dybase = dy.data_ptr<float>();
  float* gbase = dqkv.data_ptr<float>();
  const int64_t row = 3 * s.C;
  at::parallel_for(0, s.B * s.H, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch(kernels::attention_scratch_floats(s.T, s.D));
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / s.H, h = bh % s.H;
      const int64_t qoff = b * s.T * row + h * s.D, yoff = b * s.T * s.C + h * s.D;
      const float* q = base + qoff;
      float* dq = gbase + qoff;
      kernels::attention_backward_head(q, q + s.C, q + 2 * s.C, row, s.T, s.D, s.scale,
                                       pbase + bh * s.T * s.T, ybase + yoff, dybase + yoff, s.C, dq,
                                       dq + s.C, dq + 2 * s.C, scratch.data());
    }
  });
  return dqkv;
}

class FusedCausalAttention : public torch::autograd::Function<FusedCausalAttention> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& qkv,
                            int64_t n_head) {
    const FusedAttentionShape s = fused_attention_shape(qkv, n_head);
    auto P = at::empty({s.B, s.H, s.T, s.T}, qkv.options());
    auto y = at::empty({s.B, s.T, s.C}, qkv.options());
    attention_forward(qkv, s, P, y);
    ctx->save_for_backward({qkv, P, y});
    ctx->saved_data["n_head"] = n_head;
    return y;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    auto saved = ctx->get_saved_variables();
    const FusedAttentionShape s =
        fused_attention_shape(saved[0], ctx->saved_data["n_head"].toInt());
    return {attention_backward(saved[0], saved[1], saved[2], grads[0], s), at::Tensor()};
  }
};

}  // namespace

bool fused_attention_supported(const at::Tensor& qkv) {
  return kernels::fused_cpu_kernels_enabled() && qkv.device().is_cpu() &&
         qkv.scalar_type() == at::kFloat && qkv.dim() == 3 && qkv.is_contiguous();
}

at::Tensor fused_causal_attention(const at::Tensor& qkv, int64_t n_head) {
  return FusedCausalAttention::apply(qkv, n_head);
}

}  // namespace lmtrain::model
