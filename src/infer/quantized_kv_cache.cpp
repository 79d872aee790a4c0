#include "infer/quantized_kv_cache.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "model/attention.h"

namespace lmtrain::infer {

QuantizedKvCache::QuantizedKvCache(int64_t layers, int64_t max_len, model::RopeSpec rope,
                                   QuantizedKvOptions o)
    : layers_(static_cast<size_t>(layers), QuantizedKvStore(o)), max_len_(max_len), rope_(rope) {}

QuantizedKvStore& QuantizedKvCache::append(int64_t layer, const at::Tensor& k,
                                           const at::Tensor& v) {
  auto& store = layers_[static_cast<size_t>(layer)];
  auto kr = rotate(k, length_, rope_);
  if (left_padding().defined()) {
    // (B, 1, T, 1): true at this call's pad slots.
    auto slots = at::arange(length_, length_ + k.size(2), k.options().dtype(at::kLong));
    auto is_pad = (slots.unsqueeze(0) < left_padding().unsqueeze(1)).view({k.size(0), 1, -1, 1});
    store.append(kr.masked_fill(is_pad, 0), v.masked_fill(is_pad, 0));
  } else {
    store.append(kr, v);
  }
  return store;
}

std::pair<at::Tensor, at::Tensor> QuantizedKvCache::update(int64_t layer, const at::Tensor& k,
                                                           const at::Tensor& v) {
  return append(layer, k, v).read(k.scalar_type());
}

bool QuantizedKvCache::attends() const {
  if (read_ != Read::kAuto) return read_ == Read::kCodes;
  // The layer with the most groups (a layer bounded by its window holds fewer).
  int64_t most = 0;
  for (const auto& store : layers_) most = std::max(most, store.groups() * store.batch());
  return most >= 16;
}

at::Tensor QuantizedKvCache::attend(int64_t layer, const at::Tensor& q, const at::Tensor& k,
                                    const at::Tensor& v, int64_t window) {
  auto& store = append(layer, k, v);
  // The held slots end at the newest (a windowed layer dropped the ones before).
  auto key_bias = key_mask(store.size(), q.options(), length_ + k.size(2) - store.size());
  if (window > 0 && (store.size() > window || window_keep(layer) > 0)) {
    // The codes' kernel has no window (and wants whole groups, which a window bound cuts):
    // attend over the dequantised keys with the window's mask.
    auto [kd, vd] = store.read(q.scalar_type());  // (B, K, L, D)
    return model::causal_attention(q, kd, vd, 0.0, key_bias, window);
  }
  return store.attend(q, key_bias);
}

void QuantizedKvCache::advance(int64_t t) {
  length_ += t;
  for (size_t l = 0; l < layers_.size(); ++l) {
    auto& store = layers_[l];
    store.settle();
    // A windowed layer keeps its last W - 1 tokens, after settle() so that the groups are cut
    // from the same tokens as without the bound (codes stay valid: quantized_kv_store.h).
    const int64_t keep = window_keep(static_cast<int64_t>(l)), L = store.size();
    if (keep > 0 && L > keep) store.keep({{L - keep, L}});
  }
}

int64_t QuantizedKvCache::bytes() const {
  int64_t n = 0;
  for (const auto& store : layers_) n += store.bytes();
  return n;
}

}  // namespace lmtrain::infer
