#include "infer/quantized_kv_cache.h"

#include <ATen/ATen.h>

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
  const auto& store = layers_.front();  // every layer holds as many groups
  return store.groups() * store.batch() >= 16;
}

at::Tensor QuantizedKvCache::attend(int64_t layer, const at::Tensor& q, const at::Tensor& k,
                                    const at::Tensor& v, int64_t window) {
  auto& store = append(layer, k, v);
  auto key_bias = key_mask(store.size(), q.options());
  if (window > 0 && store.size() > window) {
    // The codes' kernel has no window: attend over the dequantised keys with the window's mask.
    auto [kd, vd] = store.read(q.scalar_type());  // (B, K, L, D)
    return model::causal_attention(q, kd, vd, 0.0, key_bias, window);
  }
  return store.attend(q, key_bias);
}

void QuantizedKvCache::advance(int64_t t) {
  length_ += t;
  for (auto& store : layers_) store.settle();
}

int64_t QuantizedKvCache::bytes() const {
  int64_t n = 0;
  for (const auto& store : layers_) n += store.bytes();
  return n;
}

}  // namespace lmtrain::infer
