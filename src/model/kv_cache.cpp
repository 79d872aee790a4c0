#include "model/kv_cache.h"

#include <ATen/ATen.h>

#include <limits>

#include "core/error.h"
#include "model/rope.h"

namespace lmtrain::model {

void KvCache::set_left_padding(const at::Tensor& pad) {
  if (!supports_padding()) {
    throw Error("this KV cache cannot hold left-padded rows of different lengths");
  }
  pad_ = pad.to(at::kLong);
}

at::Tensor KvCache::attend(int64_t layer, const at::Tensor& q, const at::Tensor& k,
                           const at::Tensor& v, int64_t window) {
  (void)layer, (void)q, (void)k, (void)v, (void)window;
  throw Error("internal: this KV cache does not attend itself (attends() is false)");
}

at::Tensor KvCache::positions(int64_t start, int64_t t, const at::TensorOptions& options) const {
  auto pos = at::arange(start, start + t, options.dtype(at::kLong));  // (T,)
  if (!pad_.defined()) return pos;
  return (pos.unsqueeze(0) - pad_.to(pos.device()).unsqueeze(1)).clamp_min(0);  // (B, T)
}

at::Tensor KvCache::key_mask(int64_t l, const at::TensorOptions& options, int64_t first) const {
  if (!pad_.defined()) return {};
  // Half the lowest finite value: masked scores stay finite in fp16 and bf16 too, and far below
  // any real score, so exp() of them is exactly 0 beside a real key.
  const double big = 0.5 * static_cast<double>(std::numeric_limits<c10::Half>::lowest());
  auto slots = at::arange(first, first + l, options.dtype(at::kLong));
  auto is_pad = slots.unsqueeze(0) < pad_.to(slots.device()).unsqueeze(1);  // (B, L)
  return at::zeros({pad_.size(0), l}, options)
      .masked_fill(is_pad, big)
      .view({pad_.size(0), 1, 1, l});
}

at::Tensor KvCache::rotate(const at::Tensor& k, int64_t start, const RopeSpec& rope) const {
  if (!rope.enabled) return k;
  if (!pad_.defined()) return apply_rope(k, start, rope.params);
  return apply_rope_at(k, positions(start, k.size(2), k.options()), rope.params);
}

}  // namespace lmtrain::model
