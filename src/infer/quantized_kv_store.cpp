#include "infer/quantized_kv_store.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <string>

#include "core/error.h"
#include "infer/dense_kv_store.h"
#include "infer/quantized_attention.h"

namespace lmtrain::infer {
namespace {

int64_t size_of(const at::Tensor& t) { return t.defined() ? t.numel() * t.element_size() : 0; }

// Channels per value group: G, or all of head_dim when it is smaller.
int64_t value_group(const QuantizedKvOptions& o, int64_t head_dim) {
  return std::min(o.group, head_dim);
}

// The tokens of `ranges` that fall in [offset, offset + n), relative to offset.
std::vector<TokenRange> clip(const std::vector<TokenRange>& ranges, int64_t offset, int64_t n) {
  std::vector<TokenRange> out;
  for (const auto& r : ranges) {
    const int64_t b = std::max(r.begin, offset), e = std::min(r.end, offset + n);
    if (e > b) out.push_back({b - offset, e - offset});
  }
  return out;
}

int64_t count(const std::vector<TokenRange>& ranges) {
  int64_t n = 0;
  for (const auto& r : ranges) n += r.end - r.begin;
  return n;
}

Quantized keep_tokens(const Quantized& q, const std::vector<TokenRange>& ranges, bool per_token) {
  Quantized out = q;
  out.codes = keep_token_ranges(q.codes, ranges);
  if (per_token) {  // values: a scale and zero per token
    out.scale = keep_token_ranges(q.scale, ranges);
    out.zero = keep_token_ranges(q.zero, ranges);
  }
  return out;
}

}  // namespace

void check_quantized_fits(const QuantizedKvOptions& o, int64_t head_dim, const std::string& what) {
  const int64_t c = value_group(o, head_dim);
  if (head_dim % c != 0 || (o.bits == 4 && (c % 2 != 0 || head_dim % 2 != 0))) {
    throw UsageError(what + ": group " + std::to_string(o.group) + " does not split head_dim " +
                     std::to_string(head_dim) + " into whole (and, for int4, even) groups");
  }
}

int64_t Quantized::bytes() const { return size_of(codes) + size_of(scale) + size_of(zero); }

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

at::Tensor unpacked_codes(const Quantized& q) {
  auto c = q.codes;
  if (q.bits == 4) {
    auto low = at::bitwise_and(c, 15), high = at::bitwise_right_shift(c, 4);
    auto sizes = c.sizes().vec();
    sizes.back() *= 2;
    c = at::stack({low, high}, -1).reshape(sizes);
  }
  return c;
}

at::Tensor dequantize(const Quantized& q, at::ScalarType dtype) {
  return (unpacked_codes(q).to(at::kFloat) * q.scale.to(at::kFloat) + q.zero.to(at::kFloat))
      .to(dtype);
}

void QuantizedKvStore::append(const at::Tensor& k, const at::Tensor& v) {
  k_res_ = k_res_.defined() ? at::cat({k_res_, k}, 2) : k.clone();
  v_res_ = v_res_.defined() ? at::cat({v_res_, v}, 2) : v.clone();
}

std::pair<at::Tensor, at::Tensor> QuantizedKvStore::read(at::ScalarType dtype) const {
  std::vector<at::Tensor> ks, vs;
  for (const auto& g : groups_) {
    ks.push_back(dequantize(g.k, dtype));
    vs.push_back(dequantize(g.v, dtype).flatten(3));  // (B, K, g, D)
  }
  ks.push_back(k_res_.to(dtype));
  vs.push_back(v_res_.to(dtype));
  return {at::cat(ks, 2), at::cat(vs, 2)};
}

at::Tensor QuantizedKvStore::attend(const at::Tensor& q, const at::Tensor& key_bias) const {
  StackedGroups stacked;
  if (!groups_.empty()) {
    std::vector<at::Tensor> kc, ks, kz, vc, vs, vz;
    for (const auto& g : groups_) {
      if (g.k.codes.size(2) != groups_.front().k.codes.size(2)) {
        throw Error("internal: quantised attention needs groups of one size");
      }
      kc.push_back(unpacked_codes(g.k));
      ks.push_back(g.k.scale);
      kz.push_back(g.k.zero);
      vc.push_back(unpacked_codes(g.v));
      vs.push_back(g.v.scale);
      vz.push_back(g.v.zero);
    }
    auto stack = [](const std::vector<at::Tensor>& parts, bool to_float) {
      auto t = at::stack(parts, 2);  // the group index after (B, K)
      return to_float ? t.to(at::kFloat) : t;
    };
    stacked = {stack(kc, false), stack(ks, true), stack(kz, true),
               stack(vc, false), stack(vs, true), stack(vz, true)};
  }
  return quantized_attention(q, stacked, k_res_, v_res_, key_bias);
}

void QuantizedKvStore::settle() {
  const int64_t G = opts_.group;
  // Quantise the oldest G tokens while at least R + G are held in full precision.
  while (k_res_.defined() && k_res_.size(2) >= opts_.residual + G) {
    auto kg = k_res_.narrow(2, 0, G), vg = v_res_.narrow(2, 0, G);  // (B, K, G, D)
    const auto s = vg.sizes();
    const int64_t c = value_group(opts_, s[3]);
    check_quantized_fits(opts_, s[3], "--kv_cache");
    Group g;
    g.k = quantize(kg, opts_.bits, /*reduce_dim=*/2);  // per channel
    // Values per token, over groups of c channels: (B, K, G, D/c, c) reduced on the last.
    g.v = quantize(vg.reshape({s[0], s[1], s[2], s[3] / c, c}), opts_.bits, 4);
    groups_.push_back(std::move(g));
    k_res_ = k_res_.narrow(2, G, k_res_.size(2) - G).clone();
    v_res_ = v_res_.narrow(2, G, v_res_.size(2) - G).clone();
  }
}

void QuantizedKvStore::keep(const std::vector<TokenRange>& ranges) {
  int64_t offset = 0;
  std::vector<Group> kept;
  for (auto& g : groups_) {
    const int64_t n = g.k.codes.size(2);
    const auto mine = clip(ranges, offset, n);
    offset += n;
    if (count(mine) == n) {
      kept.push_back(std::move(g));
    } else if (!mine.empty()) {  // a partly evicted group: its codes stay valid (see header)
      kept.push_back({keep_tokens(g.k, mine, false), keep_tokens(g.v, mine, true)});
    }
  }
  groups_ = std::move(kept);
  if (k_res_.defined()) {
    const auto mine = clip(ranges, offset, k_res_.size(2));
    k_res_ = keep_token_ranges(k_res_, mine);
    v_res_ = keep_token_ranges(v_res_, mine);
  }
}

int64_t QuantizedKvStore::size() const {
  int64_t n = k_res_.defined() ? k_res_.size(2) : 0;
  for (const auto& g : groups_) n += g.k.codes.size(2);
  return n;
}

int64_t QuantizedKvStore::bytes() const {
  int64_t n = size_of(k_res_) + size_of(v_res_);
  for (const auto& g : groups_) n += g.k.bytes() + g.v.bytes();
  return n;
}

}  // namespace lmtrain::infer
