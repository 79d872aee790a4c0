#include "model/rope.h"

#include <ATen/ATen.h>

namespace lmtrain::model {

at::Tensor apply_rope(const at::Tensor& x, int64_t start, double theta) {
  const int64_t T = x.size(2), D = x.size(3);
  auto f32 = x.options().dtype(at::kFloat);
  auto inv_freq =
      1.0 / at::pow(theta, at::arange(0, D, 2, x.options().dtype(at::kLong)).to(at::kFloat) / D);
  auto pos = at::arange(start, start + T, f32);
  auto angles = at::outer(pos, inv_freq);    // (T, D/2)
  auto emb = at::cat({angles, angles}, -1);  // (T, D)
  auto cos = emb.cos().to(x.scalar_type()), sin = emb.sin().to(x.scalar_type());
  auto x1 = x.narrow(-1, 0, D / 2), x2 = x.narrow(-1, D / 2, D / 2);
  auto rotated = at::cat({-x2, x1}, -1);
  return x * cos + rotated * sin;
}

}  // namespace lmtrain::model
