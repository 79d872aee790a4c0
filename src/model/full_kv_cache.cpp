#include "model/full_kv_cache.h"

#include <ATen/ATen.h>

namespace lmtrain::model {

FullKvCache::FullKvCache(int64_t layers, int64_t batch, int64_t kv_heads, int64_t max_len,
                         int64_t head_dim, const at::TensorOptions& options, RopeSpec rope)
    : max_len_(max_len), rope_(rope) {
  for (int64_t l = 0; l < layers; ++l) {
    k_.push_back(at::zeros({batch, kv_heads, max_len, head_dim}, options));
    v_.push_back(at::zeros({batch, kv_heads, max_len, head_dim}, options));
  }
}

std::pair<at::Tensor, at::Tensor> FullKvCache::update(int64_t layer, const at::Tensor& k,
                                                      const at::Tensor& v) {
  const int64_t T = k.size(2);
  auto& kl = k_[static_cast<size_t>(layer)];
  auto& vl = v_[static_cast<size_t>(layer)];
  kl.narrow(2, length_, T).copy_(rotate(k, length_, rope_));
  vl.narrow(2, length_, T).copy_(v);
  return {kl.narrow(2, 0, length_ + T), vl.narrow(2, 0, length_ + T)};
}

int64_t FullKvCache::bytes() const {
  // The held tokens' share of the preallocated buffers.
  int64_t n = 0;
  for (size_t l = 0; l < k_.size(); ++l) {
    n += 2 * k_[l].numel() / max_len_ * length_ * k_[l].element_size();
  }
  return n;
}

}  // namespace lmtrain::model
