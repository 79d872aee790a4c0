#include "infer/quantized_kv_cache.h"

#include <ATen/ATen.h>

namespace lmtrain::infer {

QuantizedKvCache::QuantizedKvCache(int64_t layers, int64_t max_len, model::RopeSpec rope,
                                   QuantizedKvOptions o)
    : layers_(static_cast<size_t>(layers), QuantizedKvStore(o)), max_len_(max_len), rope_(rope) {}

std::pair<at::Tensor, at::Tensor> QuantizedKvCache::update(int64_t layer, const at::Tensor& k,
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
  return store.read(k.scalar_type());
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
