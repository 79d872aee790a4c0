#include "model/rope.h"

#include <ATen/ATen.h>

namespace lmtrain::model {

at::Tensor apply_rope(const at::Tensor& x, int64_t start, double theta) {
  const int64_t T = x.size(2);
  return apply_rope_at(x, at::arange(start, start + T, x.options().dtype(at::kLong)), theta);
}

at::Tensor apply_rope_at(const at::Tensor& x, const at::Tensor& positions, double theta) {
  const int64_t D = x.size(3);
  auto inv_freq =
      1.0 / at::pow(theta, at::arange(0, D, 2, x.options().dtype(at::kLong)).to(at::kFloat) / D);
  auto pos = positions.to(at::kFloat);
  auto angles = pos.unsqueeze(-1) * inv_freq;  // (T, D/2) or (B, T, D/2)
  auto emb = at::cat({angles, angles}, -1);    // (..., T, D)
  if (emb.dim() == 3) emb = emb.unsqueeze(1);  // (B, 1, T, D): broadcast over heads
  auto cos = emb.cos().to(x.scalar_type()), sin = emb.sin().to(x.scalar_type());
  auto x1 = x.narrow(-1, 0, D / 2), x2 = x.narrow(-1, D / 2, D / 2);
  auto rotated = at::cat({-x2, x1}, -1);
  return x * cos + rotated * sin;
}

}  // namespace lmtrain::model
