#include "infer/quantized_kv_cache.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <string>

#include "core/error.h"
#include "model/rope.h"

namespace lmtrain::infer {

Quantized quantize(const at::Tensor& x, int bits, int64_t reduce_dim) {
  Quantized q;
  q.bits = bits;
  auto xf = x.to(at::kFloat);
  auto lo = std::get<0>(xf.min(reduce_dim, /*keepdim=*/true));
  auto hi = std::get<0>(xf.max(reduce_dim, /*keepdim=*/true));
  const double levels = static_cast<double>((1 << bits) - 1);
  auto scale = ((hi - lo) / levels).clamp_min(1e-8);
  // Stored in fp16; quantise with the rounded values so that dequantisation inverts exactly.
  q.scale = scale.to(at::kHalf);
  q.zero = lo.to(at::kHalf);
  auto codes = ((xf - q.zero.to(at::kFloat)) / q.scale.to(at::kFloat)).round().clamp(0, levels);
  auto c = codes.to(at::kByte);
  if (bits == 4) {  // two codes per byte along the last dim: low nibble even, high nibble odd
    auto even = c.slice(-1, 0, c.size(-1), 2), odd = c.slice(-1, 1, c.size(-1), 2);
    c = at::bitwise_or(even, at::bitwise_left_shift(odd, 4));
  }
  q.codes = c.contiguous();
  return q;
}

at::Tensor dequantize(const Quantized& q, at::ScalarType dtype) {
  auto c = q.codes;
  if (q.bits == 4) {
    auto low = at::bitwise_and(c, 15), high = at::bitwise_right_shift(c, 4);
    auto sizes = c.sizes().vec();
    sizes.back() *= 2;
    c = at::stack({low, high}, -1).reshape(sizes);
  }
  return (c.to(at::kFloat) * q.scale.to(at::kFloat) + q.zero.to(at::kFloat)).to(dtype);
}

QuantizedKvCache::QuantizedKvCache(int64_t layers, int64_t max_len, model::RopeSpec rope,
                                   QuantizedKvOptions o)
    : layers_(static_cast<size_t>(layers)), max_len_(max_len), rope_(rope), opts_(o) {}

std::pair<at::Tensor, at::Tensor> QuantizedKvCache::update(int64_t layer, const at::Tensor& k,
                                                           const at::Tensor& v) {
  auto& L = layers_[static_cast<size_t>(layer)];
  auto kr = rope_.enabled ? model::apply_rope(k, length_, rope_.theta) : k;
  L.k_res = L.k_res.defined() ? at::cat({L.k_res, kr}, 2) : kr.clone();
  L.v_res = L.v_res.defined() ? at::cat({L.v_res, v}, 2) : v.clone();
  std::vector<at::Tensor> ks, vs;
  for (const auto& g : L.k_groups) ks.push_back(dequantize(g, k.scalar_type()));
  for (const auto& g : L.v_groups) {
    vs.push_back(dequantize(g, v.scalar_type()).flatten(3));  // (B, K, G, D)
  }
  ks.push_back(L.k_res);
  vs.push_back(L.v_res);
  return {at::cat(ks, 2), at::cat(vs, 2)};
}

void QuantizedKvCache::advance(int64_t t) {
  length_ += t;
  const int64_t G = opts_.group;
  for (auto& L : layers_) {
    // Quantise the oldest G tokens while more than R + G are held in full precision.
    while (L.k_res.defined() && L.k_res.size(2) >= opts_.residual + G) {
      auto kg = L.k_res.narrow(2, 0, G), vg = L.v_res.narrow(2, 0, G);   // (B, K, G, D)
      L.k_groups.push_back(quantize(kg, opts_.bits, /*reduce_dim=*/2));  // per channel
      // Values per token, over groups of c channels: (B, K, G, D/c, c) reduced on the last.
      const auto s = vg.sizes();
      const int64_t c = std::min(G, s[3]);
      if (s[3] % c != 0 || (opts_.bits == 4 && (c % 2 != 0 || s[3] % 2 != 0))) {
        throw UsageError("--kv_cache: group " + std::to_string(G) + " does not split head_dim " +
                         std::to_string(s[3]) + " into whole (and, for int4, even) groups");
      }
      auto vq = quantize(vg.reshape({s[0], s[1], s[2], s[3] / c, c}), opts_.bits, 4);
      L.v_groups.push_back(vq);
      L.k_res = L.k_res.narrow(2, G, L.k_res.size(2) - G).clone();
      L.v_res = L.v_res.narrow(2, G, L.v_res.size(2) - G).clone();
    }
  }
}

int64_t QuantizedKvCache::bytes() const {
  auto size = [](const at::Tensor& t) { return t.defined() ? t.numel() * t.element_size() : 0; };
  int64_t n = 0;
  for (const auto& L : layers_) {
    for (const auto* groups : {&L.k_groups, &L.v_groups}) {
      for (const auto& g : *groups) n += size(g.codes) + size(g.scale) + size(g.zero);
    }
    n += size(L.k_res) + size(L.v_res);
  }
  return n;
}

}  // namespace lmtrain::infer
