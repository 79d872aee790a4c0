// The key/value cache of incremental decoding, as an interface: the attention of layer l hands
// each call's new keys and values (before RoPE) to update() and attends over what it returns;
// the cache decides what it keeps and how (model/full_kv_cache.h: everything, exact; infer/:
// quantised, streaming windows). Positions come from the cache too (next_position()), so a
// cache that forgets tokens can keep RoPE and learned positions inside the trained range.
//
// Order of calls for T new tokens: next_position() (for the queries, learned positions and the
// capacity check), then update(l, ...) once per layer, then advance(T).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <utility>

namespace lmtrain::model {

// How keys are rotated: RoPE (theta) or not at all (learned positions).
struct RopeSpec {
  bool enabled = false;
  double theta = 10000.0;
};

class KvCache {
 public:
  virtual ~KvCache() = default;
  // Position of the first of the next new tokens, as the model must see it.
  virtual int64_t next_position() const = 0;
  // Tokens the cache can still take in the next call (INT64_MAX: unbounded).
  virtual int64_t room() const = 0;
  // k, v: (B, K, T, D) of layer `layer`, keys not yet rotated. Returns the keys (rotated) and
  // values to attend over, (B, K, L, D) each, the new ones last, in the compute dtype.
  virtual std::pair<at::Tensor, at::Tensor> update(int64_t layer, const at::Tensor& k,
                                                   const at::Tensor& v) = 0;
  // Policies that choose by attention (H2O) get each layer's attention weights (B, H, Tq, L)
  // over the keys update() returned; the attention then computes them explicitly.
  virtual bool wants_attention() const { return false; }
  virtual void observe(int64_t layer, const at::Tensor& weights) {
    (void)layer;
    (void)weights;
  }
  // All layers have taken T new tokens.
  virtual void advance(int64_t t) = 0;
  // Tokens currently held (per layer and sequence).
  virtual int64_t held() const = 0;
  // Bytes of cache storage now held, all layers.
  virtual int64_t bytes() const = 0;
};

}  // namespace lmtrain::model
