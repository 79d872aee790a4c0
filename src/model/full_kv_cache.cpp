#include "model/full_kv_cache.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace lmtrain::model {

FullKvCache::FullKvCache(int64_t layers, int64_t batch, int64_t kv_heads, int64_t max_len,
                         int64_t head_dim, const at::TensorOptions& options, RopeSpec rope)
    : layers_(static_cast<size_t>(layers)),
      max_len_(max_len),
      batch_(batch),
      kv_heads_(kv_heads),
      head_dim_(head_dim),
      options_(options),
      rope_(rope) {}

void FullKvCache::reserve(Layer& l, int64_t keep, int64_t t) {
  if (l.k.defined() && length_ + t - l.origin <= l.k.size(2)) return;
  // Layers without a window take the whole max_len at once; windowed ones twice their window,
  // so that the move below happens once every ~W decoding steps.
  const int64_t held = length_ - l.first;
  const int64_t capacity =
      keep > 0 ? std::min(max_len_, std::max(2 * (keep + 1), held + t)) : max_len_;
  auto k = at::empty({batch_, kv_heads_, capacity, head_dim_}, options_);
  auto v = at::empty_like(k);
  if (held > 0) {
    k.narrow(2, 0, held).copy_(l.k.narrow(2, l.first - l.origin, held));
    v.narrow(2, 0, held).copy_(l.v.narrow(2, l.first - l.origin, held));
  }
  l.k = k, l.v = v, l.origin = l.first;
}

std::pair<at::Tensor, at::Tensor> FullKvCache::update(int64_t layer, const at::Tensor& k,
                                                      const at::Tensor& v) {
  const int64_t T = k.size(2);
  auto& l = layers_[static_cast<size_t>(layer)];
  reserve(l, window_keep(layer), T);
  l.k.narrow(2, length_ - l.origin, T).copy_(rotate(k, length_, rope_));
  l.v.narrow(2, length_ - l.origin, T).copy_(v);
  // Slots first..length_+T-1, the new ones last: (B, K, L, D).
  const int64_t L = length_ + T - l.first;
  return {l.k.narrow(2, l.first - l.origin, L), l.v.narrow(2, l.first - l.origin, L)};
}

void FullKvCache::advance(int64_t t) {
  length_ += t;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const int64_t keep = window_keep(static_cast<int64_t>(i));
    if (keep > 0) layers_[i].first = std::max(layers_[i].first, length_ - keep);
  }
}

int64_t FullKvCache::bytes() const {
  const int64_t per_token =
      2 * batch_ * kv_heads_ * head_dim_ * static_cast<int64_t>(options_.dtype().itemsize());
  int64_t n = 0;
  for (const auto& l : layers_) n += (length_ - l.first) * per_token;
  return n;
}

}  // namespace lmtrain::model
