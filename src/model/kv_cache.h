// The key/value cache of incremental decoding, as an interface: the attention of layer l hands
// each call's new keys and values (before RoPE) to update() and attends over what it returns;
// the cache decides what it keeps and how (model/full_kv_cache.h: everything, exact; infer/:
// quantised, streaming windows). Positions come from the cache too (next_position()), so a
// cache that forgets tokens can keep RoPE and learned positions inside the trained range.
//
// Order of calls for T new tokens: next_position() (for the queries, learned positions and the
// capacity check), then update(l, ...) once per layer, then advance(T).
//
// Batches of prompts of different lengths are left-padded (infer/batch_generator.h): row b's
// first pad[b] cache slots hold no token. Every row then appends at the same slot each step, so
// one (B, 1) decode call serves all rows; what differs per row is its positions (slot - pad[b],
// so a row's first real token is at position 0, as when it runs alone) and a key mask hiding
// the pad slots. Caches whose kept keys are exactly slots 0..L-1 support this
// (supports_padding()); the model reads positions() and key_mask() from here.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "model/rope_params.h"

namespace lmtrain::model {

// How keys are rotated: RoPE (base and scaling) or not at all (learned positions).
struct RopeSpec {
  bool enabled = false;
  RopeParams params;
};

class KvCache {
 public:
  virtual ~KvCache() = default;
  // Position of the first of the next new tokens, as the model must see it (the cache slot;
  // per row, minus the row's left padding).
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
  // Caches that attend over their own storage (reading quantised keys and values inside the
  // attention) take the whole call instead of update(): q (B, H, T, D) at next_position(),
  // rotated; k, v (B, K, T, D) new, keys not yet rotated. Returns the causal attention output
  // (B, H, T, D) over the kept tokens and the new ones, pad slots masked; window > 0: over the
  // last `window` keys of each query (model/attention.h).
  virtual bool attends() const { return false; }
  virtual at::Tensor attend(int64_t layer, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v, int64_t window);
  // All layers have taken T new tokens.
  virtual void advance(int64_t t) = 0;
  // Tokens currently held (per layer and sequence; pad slots included).
  virtual int64_t held() const = 0;
  // Bytes of cache storage now held, all layers.
  virtual int64_t bytes() const = 0;

  // Whether update() returns slots 0..L-1 in order, so that left padding can be masked.
  virtual bool supports_padding() const { return false; }
  // pad: (B,) int64 on the model's device, set before the first token. Throws when the cache
  // cannot hold padded rows.
  void set_left_padding(const at::Tensor& pad);
  const at::Tensor& left_padding() const { return pad_; }  // undefined: no padding
  // Positions of T tokens starting at slot `start`: (T,) int64 without padding, else (B, T)
  // (pad slots clamped to 0: they are masked).
  at::Tensor positions(int64_t start, int64_t t, const at::TensorOptions& options) const;
  // Additive mask (B, 1, 1, L) over the L slots first..first+L-1: a large negative value at pad
  // slots, 0 elsewhere (finite, so that a pad query, which sees only pad keys, stays finite);
  // undefined without padding. first > 0: a layer bounded by its window (below) has dropped
  // the slots before it.
  at::Tensor key_mask(int64_t l, const at::TensorOptions& options, int64_t first = 0) const;
  // k (B, K, T, D) at slots start..start+T-1 rotated by `rope` at its positions (per row).
  at::Tensor rotate(const at::Tensor& k, int64_t start, const RopeSpec& rope) const;

  // Sliding windows (model.windows, one per layer, 0: none): a layer with window W > 0 reads
  // only the last W keys of each query, so between calls its cache keeps only the last W - 1
  // tokens (window_keep(l) = W - 1; 0: the layer keeps what its policy keeps). Kept keys stay
  // a contiguous run ending at the newest slot, so the window's mask, which counts keys back
  // from the query, still applies; positions are the policy's (absolute but in streaming). Set
  // before the first token (GptImpl::make_cache and infer::make_kv_cache do, from the model's
  // config).
  void bound_to_windows(const std::vector<int64_t>& windows) { windows_ = windows; }
  int64_t window_keep(int64_t layer) const {
    const auto l = static_cast<size_t>(layer);
    return l < windows_.size() && windows_[l] > 0 ? windows_[l] - 1 : 0;
  }

 private:
  at::Tensor pad_;
  std::vector<int64_t> windows_;  // per layer
};

}  // namespace lmtrain::model
