#include "model/layers.h"

namespace lmtrain::model {

LinearImpl::LinearImpl(int64_t in, int64_t out, bool with_bias) {
  weight = register_parameter("weight", torch::empty({out, in}));
  if (with_bias) bias = register_parameter("bias", torch::zeros({out}));
}

torch::Tensor LinearImpl::forward(const torch::Tensor& x) const {
  // at::linear folds (B, T, in) inputs into one addmm when x is contiguous.
  return torch::linear(x, weight, bias);
}

LayerNormImpl::LayerNormImpl(int64_t d, bool with_bias, bool rms_norm, double epsilon)
    : dim(d), rms(rms_norm), eps(epsilon) {
  weight = register_parameter("weight", torch::ones({d}));
  if (with_bias && !rms) bias = register_parameter("bias", torch::zeros({d}));
}

torch::Tensor LayerNormImpl::forward(const torch::Tensor& x) const {
  if (rms) {
    auto xf = x.to(torch::kFloat32);
    auto y = xf * torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
    return weight * y.to(x.scalar_type());
  }
  return torch::layer_norm(x, {dim}, weight, bias, eps, /*cudnn_enable=*/true);
}

EmbeddingImpl::EmbeddingImpl(int64_t num, int64_t d) {
  weight = register_parameter("weight", torch::empty({num, d}));
}

torch::Tensor EmbeddingImpl::forward(const torch::Tensor& ids) const {
  return torch::embedding(weight, ids);
}

}  // namespace lmtrain::model
