#include "model/attention.h"

#include <cmath>
#include <limits>
#include <vector>

#include "core/torch_compat.h"
#include "model/dropout.h"

namespace lmtrain::model {
namespace {

// Whether a window hides any key from a query: some query sees more than `window` keys.
bool window_applies(int64_t tk, int64_t window) { return window > 0 && tk > window; }

}  // namespace

at::Tensor causal_window_mask(int64_t tq, int64_t tk, int64_t window,
                              const at::TensorOptions& opts) {
  // Training calls it with one shape every step; a windowed model alternates two (full and
  // windowed layers), so the cache holds one entry per window.
  struct Entry {
    int64_t window;
    at::Tensor mask;
  };
  thread_local std::vector<Entry> cached;
  for (const auto& e : cached) {
    const auto& m = e.mask;
    if (e.window == window && m.size(0) == tq && m.size(1) == tk &&
        m.options().dtype() == opts.dtype() && m.device() == opts.device()) {
      return m;
    }
  }
  const double inf = std::numeric_limits<float>::infinity();
  // Query i sits at position tk - tq + i: keys after it are above the shifted diagonal...
  auto mask = at::full({tq, tk}, -inf, opts).triu(tk - tq + 1);
  if (window > 0) {  // ...and keys at or before position - window below the window's diagonal
    mask = mask + at::full({tq, tk}, -inf, opts).tril(tk - tq - window);
  }
  if (cached.size() >= 4) cached.erase(cached.begin());
  cached.push_back({window, mask});
  return mask;
}

at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            double dropout_p, const at::Tensor& key_bias, int64_t window) {
  const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), D = q.size(3);
  const int64_t Tk = k.size(2), K = k.size(1);
  if (!window_applies(Tk, window)) window = 0;
  // The fused kernel draws dropout from the global generator: only use it without dropout.
  if (Tq == Tk && dropout_p == 0 && !key_bias.defined() && window == 0) {
    return K == H ? compat::fused_causal_sdpa(q, k, v, dropout_p)
                  : compat::fused_causal_sdpa_grouped(q, k, v, dropout_p);
  }
  if (window > 0 && dropout_p == 0) {
    // SDPA with the window as a dense additive mask, (Tq, Tk) or with the pad slots' key bias
    // (B, 1, Tq, Tk).
    at::Tensor mask = causal_window_mask(Tq, Tk, window, q.options());
    if (key_bias.defined()) mask = mask + key_bias;
    return compat::masked_sdpa(q, k, v, mask);
  }
  if (K < H) {  // the explicit path below wants H key/value heads
    return causal_attention(q, k.repeat_interleave(H / K, 1), v.repeat_interleave(H / K, 1),
                            dropout_p, key_bias, window);
  }
  // Explicit path: scores = mask + scale * q k^T in one baddbmm, softmax, weights @ v.
  // (B*H, Tq, D) x (B*H, D, Tk) -> (B*H, Tq, Tk)
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  at::Tensor q3 = q.reshape({B * H, Tq, D});
  at::Tensor k3 = k.reshape({B * H, Tk, D});
  at::Tensor v3 = v.reshape({B * H, Tk, D});
  at::Tensor mask = causal_window_mask(Tq, Tk, window, q.options());  // (Tq, Tk)
  if (key_bias.defined()) {  // (B, 1, 1, Tk) -> (B * H, Tq, Tk)
    mask = (mask + key_bias).expand({B, H, Tq, Tk}).reshape({B * H, Tq, Tk});
  }
  at::Tensor scores = at::baddbmm(mask, q3, k3.transpose(1, 2), 1.0, scale);
  at::Tensor weights = at::softmax(scores, -1);
  // Dropped as (B, H, Tq, Tk), the same memory order: a split run's heads are dim 1.
  if (dropout_p > 0) {
    weights = dropout(weights.view({B, H, Tq, Tk}), dropout_p).view({B * H, Tq, Tk});
  }
  return at::bmm(weights, v3).view({B, H, Tq, D});
}

std::pair<at::Tensor, at::Tensor> causal_attention_with_weights(const at::Tensor& q,
                                                                const at::Tensor& k,
                                                                const at::Tensor& v,
                                                                int64_t window) {
  const int64_t Tq = q.size(2), Tk = k.size(2), D = q.size(3);
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  if (!window_applies(Tk, window)) window = 0;
  auto scores =
      at::matmul(q, k.transpose(2, 3)) * scale + causal_window_mask(Tq, Tk, window, q.options());
  auto weights = at::softmax(scores, -1);  // (B, H, Tq, Tk)
  return {at::matmul(weights, v), weights};
}

}  // namespace lmtrain::model
