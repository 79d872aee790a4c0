#include "infer/streaming_kv_cache.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>

#include "infer/dense_kv_store.h"
#include "model/rope.h"

namespace lmtrain::infer {

StreamingKvCache::StreamingKvCache(int64_t layers, int64_t sinks, int64_t window,
                                   model::RopeSpec rope, const KvStoreFactory& store)
    : sinks_(sinks), window_(window), rope_(rope) {
  for (int64_t l = 0; l < layers; ++l) {
    layers_.push_back(store ? store() : std::make_unique<DenseKvStore>());
  }
}

int64_t StreamingKvCache::room() const { return std::numeric_limits<int64_t>::max(); }

std::pair<at::Tensor, at::Tensor> StreamingKvCache::update(int64_t layer, const at::Tensor& k,
                                                           const at::Tensor& v) {
  auto& store = *layers_[static_cast<size_t>(layer)];
  store.append(k, v);
  auto [kl, vl] = store.read(k.scalar_type());  // (B, K, L, D)
  // Positions by index in the cache: the kept tokens 0..held-1, the new ones after them. A
  // layer bounded by its window holds fewer: its tokens end at the same index as the others'.
  const int64_t start = held_ + k.size(2) - kl.size(2);
  return {rope_.enabled ? model::apply_rope(kl, start, rope_.params) : kl, vl};
}

void StreamingKvCache::advance(int64_t /*t*/) {
  held_ = 0;
  for (size_t l = 0; l < layers_.size(); ++l) {
    auto& store = layers_[l];
    const int64_t L = store->size();
    if (L > sinks_ + window_) store->keep({{0, sinks_}, {L - window_, L}});  // [0, S), last W
    store->settle();
    // A windowed layer then keeps the last W - 1 of those: its window, counted back from the
    // query over the cache's indices, reads no others.
    const int64_t keep = window_keep(static_cast<int64_t>(l)), kept = store->size();
    if (keep > 0 && kept > keep) store->keep({{kept - keep, kept}});
    held_ = std::max(held_, store->size());  // the index of the next token, in every layer
  }
}

int64_t StreamingKvCache::bytes() const {
  int64_t n = 0;
  for (const auto& store : layers_) n += store->bytes();
  return n;
}

}  // namespace lmtrain::infer
