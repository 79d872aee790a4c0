#include "model/rope.h"

#include <ATen/ATen.h>

#include <utility>

namespace lmtrain::model {
namespace {

// The angles (T, D/2) or (B, T, D/2) at `positions` (T,) or (B, T), fp32.
at::Tensor rope_angles(const at::Tensor& positions, int64_t D, double theta) {
  auto inv_freq =
      1.0 /
      at::pow(theta, at::arange(0, D, 2, positions.options().dtype(at::kLong)).to(at::kFloat) / D);
  return positions.to(at::kFloat).unsqueeze(-1) * inv_freq;
}

// cos and sin (..., T, D) of the angles at `positions` (T,) or (B, T), in x's dtype.
std::pair<at::Tensor, at::Tensor> rope_tables(const at::Tensor& positions, int64_t D, double theta,
                                              at::ScalarType dtype) {
  auto angles = rope_angles(positions, D, theta);  // (T, D/2) or (B, T, D/2)
  auto emb = at::cat({angles, angles}, -1);        // (..., T, D)
  if (emb.dim() == 3) emb = emb.unsqueeze(1);      // (B, 1, T, D): broadcast over heads
  return {emb.cos().to(dtype), emb.sin().to(dtype)};
}

at::Tensor rotate(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t D = x.size(3);
  auto x1 = x.narrow(-1, 0, D / 2), x2 = x.narrow(-1, D / 2, D / 2);
  return x * cos + at::cat({-x2, x1}, -1) * sin;
}

}  // namespace

at::Tensor apply_rope(const at::Tensor& x, int64_t start, double theta) {
  // The tables of contiguous positions are the same for q and k of every layer of a forward (and
  // of every step): build them once per shape instead of 8 ops per call. One entry per thread,
  // as attention.cpp caches its causal mask; a CUDA graph captures after eager warm-up steps
  // that filled it.
  struct Key {
    int64_t start = -1, T = 0, D = 0;
    double theta = 0;
    at::ScalarType dtype = at::kFloat;
    c10::Device device = c10::kCPU;
    bool operator==(const Key& o) const {
      return start == o.start && T == o.T && D == o.D && theta == o.theta && dtype == o.dtype &&
             device == o.device;
    }
  };
  thread_local Key cached_key;
  thread_local std::pair<at::Tensor, at::Tensor> cached;
  const Key key{start, x.size(2), x.size(3), theta, x.scalar_type(), x.device()};
  if (!(key == cached_key) || !cached.first.defined()) {
    cached = rope_tables(at::arange(start, start + key.T, x.options().dtype(at::kLong)), key.D,
                         theta, key.dtype);
    cached_key = key;
  }
  return rotate(x, cached.first, cached.second);
}

at::Tensor apply_rope_at(const at::Tensor& x, const at::Tensor& positions, double theta) {
  auto [cos, sin] = rope_tables(positions, x.size(3), theta, x.scalar_type());
  return rotate(x, cos, sin);
}

std::pair<at::Tensor, at::Tensor> rope_half_tables(int64_t T, int64_t D, double theta,
                                                   c10::Device device) {
  struct Key {
    int64_t T = 0, D = 0;
    double theta = 0;
    c10::Device device = c10::kCPU;
    bool operator==(const Key& o) const {
      return T == o.T && D == o.D && theta == o.theta && device == o.device;
    }
  };
  thread_local Key cached_key;
  thread_local std::pair<at::Tensor, at::Tensor> cached;
  const Key key{T, D, theta, device};
  if (!(key == cached_key) || !cached.first.defined()) {
    auto angles = rope_angles(at::arange(T, at::TensorOptions().dtype(at::kLong).device(device)), D,
                              theta);  // (T, D/2)
    cached = {angles.cos().contiguous(), angles.sin().contiguous()};
    cached_key = key;
  }
  return cached;
}

}  // namespace lmtrain::model
