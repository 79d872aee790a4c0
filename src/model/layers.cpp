#include "model/layers.h"

#include "core/error.h"
#include "model/fp8_linear.h"
#include "model/fused_gelu.h"
#include "model/fused_swiglu.h"

namespace lmtrain::model {

namespace {
ParamTag constant_tag(InitRule init) {
  ParamTag t;
  t.init = init;
  t.decay = false;
  return t;
}
}  // namespace

LinearImpl::LinearImpl(int64_t in, int64_t out, bool with_bias, ParamTag weight_tag) {
  weight = register_tagged("weight", torch::empty({out, in}), weight_tag);
  if (with_bias) bias = register_tagged("bias", torch::zeros({out}), constant_tag(InitRule::kZero));
}

torch::Tensor LinearImpl::forward(const torch::Tensor& x) const {
  if (product_) return product_(x, weight, bias);
  // at::linear folds (B, T, in) inputs into one addmm when x is contiguous.
  auto y = fp8 && fp8_linear_supported(x, weight) ? fp8_linear(x, weight, bias)
                                                  : torch::linear(x, weight, bias);  // (..., out)
  const int64_t out = weight.size(0);
  for (const auto& [name, a] : adapters) {
    auto d = a->delta(x);  // (..., rows)
    if (a->rows != out) {  // zero-pad the slice to the full output: (..., out)
      d = torch::constant_pad_nd(d, {a->row_offset, out - a->row_offset - a->rows});
    }
    y = y + d;
  }
  return y;
}

void LinearImpl::add_adapter(const std::string& name, LoraAdapter adapter) {
  adapters.emplace_back(name, register_module(name, adapter));
}

LayerNormImpl::LayerNormImpl(int64_t d, bool with_bias, bool rms_norm, double epsilon,
                             bool with_weight)
    : dim(d), rms(rms_norm), eps(epsilon) {
  if (!with_weight && !rms) throw Error("internal: a LayerNorm without weight must be an RMSNorm");
  if (with_weight)
    weight = register_tagged("weight", torch::ones({d}), constant_tag(InitRule::kOne));
  if (with_bias && !rms)
    bias = register_tagged("bias", torch::zeros({d}), constant_tag(InitRule::kZero));
}

namespace {
// RMSNorm without a weight (nanochat's norm()): in fp32, back to x's type.
torch::Tensor bare_rms_norm(const torch::Tensor& x, double eps) {
  auto x32 = x.to(torch::kFloat);
  return (x32 * torch::rsqrt(x32.square().mean(-1, true) + eps)).to(x.scalar_type());
}
}  // namespace

torch::Tensor LayerNormImpl::forward(const torch::Tensor& x) const {
  if (!weight.defined()) return bare_rms_norm(x, eps);
  return add_norm(x, torch::Tensor(), weight, bias, rms, eps).y;
}

AddNormOutput LayerNormImpl::forward_add(const torch::Tensor& x, const torch::Tensor& delta) const {
  if (!weight.defined()) {
    auto h = delta.defined() ? x + delta : x;
    return {h, bare_rms_norm(h, eps)};
  }
  return add_norm(x, delta, weight, bias, rms, eps);
}

EmbeddingImpl::EmbeddingImpl(int64_t num, int64_t d, LrGroup lr_group) {
  ParamTag tag;  // N(0, init_std), no weight decay, not a Muon matrix
  tag.decay = false;
  tag.lr_group = lr_group;
  weight = register_tagged("weight", torch::empty({num, d}), tag);
}

torch::Tensor EmbeddingImpl::forward(const torch::Tensor& ids) const {
  if (lookup_) return lookup_(ids, weight);
  return lookup(weight, ids, sink_);
}

torch::Tensor mlp_activation(const torch::Tensor& h, MlpKind kind, int64_t hidden) {
  switch (kind) {
    case MlpKind::kSwiGlu:
      return swiglu(h, hidden);
    case MlpKind::kRelu2:
      return torch::relu(h).square();
    case MlpKind::kGelu:
      break;
  }
  return gelu_tanh(h);
}

}  // namespace lmtrain::model
