#include "model/attention.h"

#include <cmath>
#include <limits>

#include "core/torch_compat.h"
#include "model/dropout.h"

namespace lmtrain::model {
namespace {

// Additive causal mask (Tq, Tk): 0 where allowed, -inf above the shifted diagonal.
// Cached per thread for the last shape: training calls it with one shape every step.
at::Tensor causal_mask(int64_t tq, int64_t tk, const at::TensorOptions& opts) {
  thread_local at::Tensor cached;
  if (cached.defined() && cached.size(0) == tq && cached.size(1) == tk &&
      cached.options().dtype() == opts.dtype() && cached.device() == opts.device()) {
    return cached;
  }
  cached = at::full({tq, tk}, -std::numeric_limits<float>::infinity(), opts).triu(tk - tq + 1);
  return cached;
}

}  // namespace

at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            double dropout_p, const at::Tensor& key_bias) {
  const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), D = q.size(3);
  const int64_t Tk = k.size(2), K = k.size(1);
  // The fused kernel draws dropout from the global generator: only use it without dropout.
  if (Tq == Tk && dropout_p == 0 && !key_bias.defined()) {
    return K == H ? compat::fused_causal_sdpa(q, k, v, dropout_p)
                  : compat::fused_causal_sdpa_grouped(q, k, v, dropout_p);
  }
  if (K < H) {  // the explicit path below wants H key/value heads
    return causal_attention(q, k.repeat_interleave(H / K, 1), v.repeat_interleave(H / K, 1),
                            dropout_p, key_bias);
  }
  // Explicit path: scores = mask + scale * q k^T in one baddbmm, softmax, weights @ v.
  // (B*H, Tq, D) x (B*H, D, Tk) -> (B*H, Tq, Tk)
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  at::Tensor q3 = q.reshape({B * H, Tq, D});
  at::Tensor k3 = k.reshape({B * H, Tk, D});
  at::Tensor v3 = v.reshape({B * H, Tk, D});
  at::Tensor mask = causal_mask(Tq, Tk, q.options());  // (Tq, Tk)
  if (key_bias.defined()) {                            // (B, 1, 1, Tk) -> (B * H, Tq, Tk)
    mask = (mask + key_bias).expand({B, H, Tq, Tk}).reshape({B * H, Tq, Tk});
  }
  at::Tensor scores = at::baddbmm(mask, q3, k3.transpose(1, 2), 1.0, scale);
  at::Tensor weights = at::softmax(scores, -1);
  if (dropout_p > 0) weights = dropout(weights, dropout_p);
  return at::bmm(weights, v3).view({B, H, Tq, D});
}

std::pair<at::Tensor, at::Tensor> causal_attention_with_weights(const at::Tensor& q,
                                                                const at::Tensor& k,
                                                                const at::Tensor& v) {
  const int64_t Tq = q.size(2), Tk = k.size(2), D = q.size(3);
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  auto scores = at::matmul(q, k.transpose(2, 3)) * scale + causal_mask(Tq, Tk, q.options());
  auto weights = at::softmax(scores, -1);  // (B, H, Tq, Tk)
  return {at::matmul(weights, v), weights};
}

}  // namespace lmtrain::model
