#include "infer/streaming_kv_cache.h"

#include <ATen/ATen.h>

#include <limits>

#include "model/rope.h"

namespace lmtrain::infer {

StreamingKvCache::StreamingKvCache(int64_t layers, int64_t sinks, int64_t window,
                                   model::RopeSpec rope)
    : k_(static_cast<size_t>(layers)),
      v_(static_cast<size_t>(layers)),
      sinks_(sinks),
      window_(window),
      rope_(rope) {}

int64_t StreamingKvCache::room() const { return std::numeric_limits<int64_t>::max(); }

std::pair<at::Tensor, at::Tensor> StreamingKvCache::update(int64_t layer, const at::Tensor& k,
                                                           const at::Tensor& v) {
  auto& kl = k_[static_cast<size_t>(layer)];
  auto& vl = v_[static_cast<size_t>(layer)];
  kl = kl.defined() ? at::cat({kl, k}, 2) : k.clone();
  vl = vl.defined() ? at::cat({vl, v}, 2) : v.clone();
  // Positions by index in the cache: the kept tokens 0..held-1, the new ones after them.
  return {rope_.enabled ? model::apply_rope(kl, 0, rope_.theta) : kl, vl};
}

void StreamingKvCache::advance(int64_t /*t*/) {
  for (size_t l = 0; l < k_.size(); ++l) {
    auto& kl = k_[l];
    auto& vl = v_[l];
    const int64_t L = kl.size(2);
    if (L <= sinks_ + window_) continue;
    // Keep [0, S) and the last W.
    kl = at::cat({kl.narrow(2, 0, sinks_), kl.narrow(2, L - window_, window_)}, 2);
    vl = at::cat({vl.narrow(2, 0, sinks_), vl.narrow(2, L - window_, window_)}, 2);
  }
  held_ = k_.empty() || !k_[0].defined() ? 0 : k_[0].size(2);
}

int64_t StreamingKvCache::bytes() const {
  int64_t n = 0;
  for (size_t l = 0; l < k_.size(); ++l) {
    if (k_[l].defined()) n += (k_[l].numel() + v_[l].numel()) * k_[l].element_size();
  }
  return n;
}

}  // namespace lmtrain::infer
