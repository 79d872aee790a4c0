#include "infer/quantized_attention.h"

#include <ATen/ATen.h>

#include <cmath>

namespace lmtrain::infer {

at::Tensor quantized_attention(const at::Tensor& q, const StackedGroups& g,
                               const at::Tensor& residual_k, const at::Tensor& residual_v,
                               const at::Tensor& key_bias) {
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3);
  const int64_t K = residual_k.size(1), rep = H / K, r = residual_k.size(2);
  const bool has_groups = g.key_codes.defined() && g.key_codes.size(2) > 0;
  const int64_t n = has_groups ? g.key_codes.size(2) : 0, G = has_groups ? g.key_codes.size(3) : 0;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  // Query head h reads kv head h / rep: (B, K, rep T, D), the rep heads' queries side by side.
  auto qf = q.to(at::kFloat).reshape({B, K, rep * T, D});

  std::vector<at::Tensor> parts;  // scores (B, K, rep T, *)
  if (has_groups) {
    auto qs = qf.unsqueeze(2) * g.key_scale;                                // (B, K, n, RT, D)
    auto s = at::matmul(qs, g.key_codes.to(at::kFloat).transpose(-1, -2));  // (B, K, n, RT, G)
    s = s + at::matmul(qf.unsqueeze(2), g.key_zero.transpose(-1, -2));      // + (B, K, n, RT, 1)
    parts.push_back(s.permute({0, 1, 3, 2, 4}).reshape({B, K, rep * T, n * G}));
  }
  parts.push_back(at::matmul(qf, residual_k.to(at::kFloat).transpose(-1, -2)));  // (B, K, RT, r)
  auto scores = at::cat(parts, -1) * scale;  // (B, K, RT, L), L = n G + r
  const int64_t L = n * G + r;
  // Causality among the new tokens: query i (slot L - T + i) sees keys up to its own slot.
  if (T > 1) {
    auto key = at::arange(L, q.options().dtype(at::kLong));
    auto query = at::arange(L - T, L, q.options().dtype(at::kLong));
    auto future = key.unsqueeze(0) > query.unsqueeze(1);  // (T, L)
    scores = scores.view({B, K, rep, T, L})
                 .masked_fill(future, -std::numeric_limits<float>::infinity())
                 .view({B, K, rep * T, L});
  }
  if (key_bias.defined()) scores = scores + key_bias.to(at::kFloat);  // (B, 1, 1, L)
  auto w = at::softmax(scores, -1);

  auto out = at::matmul(w.narrow(-1, n * G, r), residual_v.to(at::kFloat));  // (B, K, RT, D)
  if (has_groups) {
    const int64_t J = g.value_codes.size(4), c = g.value_codes.size(5);
    auto wg = w.narrow(-1, 0, n * G).reshape({B, K, rep * T, n, G}).permute({0, 1, 3, 2, 4});
    // (B, K, n, RT, G) weights times each token's value scale, per channel group j:
    auto ws = wg.unsqueeze(-1) * g.value_scale.squeeze(-1).unsqueeze(3);    // (B, K, n, RT, G, J)
    auto codes = g.value_codes.to(at::kFloat).permute({0, 1, 2, 4, 3, 5});  // (B, K, n, J, G, c)
    auto v = at::matmul(ws.permute({0, 1, 2, 5, 3, 4}), codes);             // (B, K, n, J, RT, c)
    auto z = at::matmul(wg, g.value_zero.squeeze(-1));                      // (B, K, n, RT, J)
    v = v.sum(2);                                                           // (B, K, J, RT, c)
    z = z.sum(2);                                                           // (B, K, RT, J)
    out = out + v.permute({0, 1, 3, 2, 4}).reshape({B, K, rep * T, J * c}) +
          z.unsqueeze(-1).expand({B, K, rep * T, J, c}).reshape({B, K, rep * T, J * c});
  }
  return out.view({B, H, T, D}).to(q.scalar_type());
}

}  // namespace lmtrain::infer
