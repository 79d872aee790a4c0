#include "model/rope.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <utility>

namespace lmtrain::model {

namespace {

// RoPE's inverse frequencies for each scaling type, op for op as transformers'
// modeling_rope_utils.py computes them (fp32 tensors, Python doubles for the scalars), so the
// tables agree bitwise and not just closely. Where Python writes `scalar / tensor` it runs
// tensor.reciprocal() * scalar (torch.Tensor.__rtruediv__), which is spelled out here: ATen's C++
// `scalar / tensor` divides instead and can differ in the last bit.

constexpr double kPi = 3.14159265358979323846;

// 1 / theta^(2i / D), i < D/2: the default frequencies (D/2,) fp32.
at::Tensor default_inv_freq(double theta, int64_t D, c10::Device device) {
  auto exps =
      at::arange(0, D, 2, at::TensorOptions().dtype(at::kLong).device(device)).to(at::kFloat) /
      D;  // (D/2,)
  return at::pow(theta, exps).reciprocal();
}

// Dynamic NTK (HF _compute_dynamic_ntk_parameters with a tensor seq_len, as its
// dynamic_frequency_update passes one): the base grows by
//   ((factor * seq_len / original) - (factor - 1)) ^ (D / (D - 2)),
// computed in fp32 as torch does on the int64 seq_len tensor.
at::Tensor dynamic_inv_freq(const RopeParams& r, int64_t D, int64_t seq_len, c10::Device device) {
  const auto& s = r.scaling;
  auto opts = at::TensorOptions().dtype(at::kLong).device(device);
  auto len = at::maximum(at::scalar_tensor(seq_len, opts), at::scalar_tensor(s.original_max, opts));
  auto grow = ((len * s.factor) / s.original_max - (s.factor - 1))
                  .pow(static_cast<double>(D) / static_cast<double>(D - 2));
  auto base = grow * r.theta;  // 0-dim fp32
  auto exps = at::arange(0, D, 2, opts).to(at::kFloat) / D;
  return at::pow(base, exps).reciprocal();
}

// YaRN (HF _compute_yarn_parameters): interpolated frequencies below the correction range,
// extrapolated ones above it, a linear ramp between.
at::Tensor yarn_inv_freq(const RopeParams& r, int64_t D, c10::Device device) {
  const auto& s = r.scaling;
  const double base = r.theta;
  auto correction_dim = [&](double rotations) {
    return (D * std::log(s.original_max / (rotations * 2 * kPi))) / (2 * std::log(base));
  };
  double low = correction_dim(s.beta_fast), high = correction_dim(s.beta_slow);
  if (s.truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(D - 1));
  if (low == high) high += 0.001;  // HF: prevents a division by zero
  auto fopts = at::TensorOptions().dtype(at::kFloat).device(device);
  auto pos_freqs =
      at::pow(base, at::arange(0, D, 2, fopts.dtype(at::kLong)).to(at::kFloat) / D);  // (D/2,)
  auto extrapolation = pos_freqs.reciprocal();
  auto interpolation = (pos_freqs * s.factor).reciprocal();
  auto ramp = ((at::arange(D / 2, fopts) - low) / (high - low)).clamp(0, 1);
  auto extrapolation_factor = 1 - ramp;
  return interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor;
}

// YaRN's attention factor: the configured one, else HF's get_mscale(factor).
double yarn_attention_factor(const RopeScaling& s) {
  if (s.attention_factor > 0) return s.attention_factor;
  return s.factor <= 1 ? 1.0 : 0.1 * std::log(s.factor) + 1.0;
}

// Llama 3.1 (HF _compute_llama3_parameters): wavelengths longer than original / low_freq_factor
// are divided by factor, shorter than original / high_freq_factor kept, and the band between
// blended smoothly.
at::Tensor llama3_inv_freq(const RopeParams& r, int64_t D, c10::Device device) {
  const auto& s = r.scaling;
  auto inv_freq = default_inv_freq(r.theta, D, device);
  const double old_len = static_cast<double>(s.original_max);
  const double low_freq_wavelen = old_len / s.low_freq_factor;
  const double high_freq_wavelen = old_len / s.high_freq_factor;
  auto wavelen = inv_freq.reciprocal() * (2 * kPi);
  auto inv_llama = at::where(wavelen > low_freq_wavelen, inv_freq / s.factor, inv_freq);
  auto smooth = (wavelen.reciprocal() * old_len - s.low_freq_factor) /
                (s.high_freq_factor - s.low_freq_factor);
  auto smoothed = (1 - smooth) * inv_llama / s.factor + smooth * inv_llama;
  auto medium =
      (wavelen < high_freq_wavelen).logical_not() * (wavelen > low_freq_wavelen).logical_not();
  return at::where(medium, smoothed, inv_llama);
}

}  // namespace

RopeFrequencies rope_frequencies(const RopeParams& rope, int64_t D, int64_t seq_len,
                                 c10::Device device) {
  const auto& s = rope.scaling;
  switch (s.type) {
    case RopeType::kNone:
      break;
    case RopeType::kLinear:
      return {default_inv_freq(rope.theta, D, device) / s.factor, 1.0};
    case RopeType::kDynamic:
      if (seq_len <= s.original_max) break;
      return {dynamic_inv_freq(rope, D, seq_len, device), 1.0};
    case RopeType::kYarn:
      return {yarn_inv_freq(rope, D, device), yarn_attention_factor(s)};
    case RopeType::kLlama3:
      return {llama3_inv_freq(rope, D, device), 1.0};
  }
  return {default_inv_freq(rope.theta, D, device), 1.0};
}

namespace {

// The angles (T, D/2) or (B, T, D/2) at `positions` (T,) or (B, T), fp32, and the attention
// scaling of cos and sin.
std::pair<at::Tensor, double> rope_angles(const at::Tensor& positions, int64_t D,
                                          const RopeParams& rope, int64_t seq_len) {
  auto f = rope_frequencies(rope, D, seq_len, positions.device());
  return {positions.to(at::kFloat).unsqueeze(-1) * f.inv_freq, f.attention_scaling};
}

// The largest position + 1 of `positions`: a host read, needed by dynamic scaling only.
int64_t span_of(const at::Tensor& positions, const RopeParams& rope) {
  if (!rope.dynamic() || positions.numel() == 0) return 0;
  return positions.max().item<int64_t>() + 1;
}

// cos and sin (..., T, D) of the angles at `positions` (T,) or (B, T), in x's dtype. As HF:
// emb.cos() * attention_scaling in fp32, then the cast.
std::pair<at::Tensor, at::Tensor> rope_tables(const at::Tensor& positions, int64_t D,
                                              const RopeParams& rope, int64_t seq_len,
                                              at::ScalarType dtype) {
  auto [angles, scale] = rope_angles(positions, D, rope, seq_len);  // (T, D/2) or (B, T, D/2)
  auto emb = at::cat({angles, angles}, -1);                         // (..., T, D)
  if (emb.dim() == 3) emb = emb.unsqueeze(1);  // (B, 1, T, D): broadcast over heads
  auto cos = emb.cos(), sin = emb.sin();
  if (scale != 1.0) cos = cos * scale, sin = sin * scale;
  return {cos.to(dtype), sin.to(dtype)};
}

at::Tensor rotate(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t D = x.size(3);
  auto x1 = x.narrow(-1, 0, D / 2), x2 = x.narrow(-1, D / 2, D / 2);
  return x * cos + at::cat({-x2, x1}, -1) * sin;
}

}  // namespace

at::Tensor apply_rope(const at::Tensor& x, int64_t start, const RopeParams& rope) {
  // The tables of contiguous positions are the same for q and k of every layer of a forward (and
  // of every step): build them once per shape instead of 8 ops per call. One entry per thread,
  // as attention.cpp caches its causal mask; a CUDA graph captures after eager warm-up steps
  // that filled it.
  struct Key {
    int64_t start = -1, T = 0, D = 0;
    RopeParams rope;
    at::ScalarType dtype = at::kFloat;
    c10::Device device = c10::kCPU;
    bool operator==(const Key& o) const {
      return start == o.start && T == o.T && D == o.D && rope == o.rope && dtype == o.dtype &&
             device == o.device;
    }
  };
  thread_local Key cached_key;
  thread_local std::pair<at::Tensor, at::Tensor> cached;
  const Key key{start, x.size(2), x.size(3), rope, x.scalar_type(), x.device()};
  if (!(key == cached_key) || !cached.first.defined()) {
    cached = rope_tables(at::arange(start, start + key.T, x.options().dtype(at::kLong)), key.D,
                         rope, start + key.T, key.dtype);
    cached_key = key;
  }
  return rotate(x, cached.first, cached.second);
}

at::Tensor apply_rope_at(const at::Tensor& x, const at::Tensor& positions, const RopeParams& rope) {
  auto [cos, sin] =
      rope_tables(positions, x.size(3), rope, span_of(positions, rope), x.scalar_type());
  return rotate(x, cos, sin);
}

std::pair<at::Tensor, at::Tensor> rope_half_tables(int64_t T, int64_t D, const RopeParams& rope,
                                                   c10::Device device) {
  struct Key {
    int64_t T = 0, D = 0;
    RopeParams rope;
    c10::Device device = c10::kCPU;
    bool operator==(const Key& o) const {
      return T == o.T && D == o.D && rope == o.rope && device == o.device;
    }
  };
  thread_local Key cached_key;
  thread_local std::pair<at::Tensor, at::Tensor> cached;
  const Key key{T, D, rope, device};
  if (!(key == cached_key) || !cached.first.defined()) {
    auto [angles, scale] =
        rope_angles(at::arange(T, at::TensorOptions().dtype(at::kLong).device(device)), D, rope,
                    T);  // (T, D/2)
    auto cos = angles.cos(), sin = angles.sin();
    if (scale != 1.0) cos = cos * scale, sin = sin * scale;
    cached = {cos.contiguous(), sin.contiguous()};
    cached_key = key;
  }
  return cached;
}

}  // namespace lmtrain::model
