// StreamingLLM (Xiao et al., 2023): keep the first S tokens (attention sinks) and the last W,
// drop the middle. Keys are stored unrotated and rotated at every read by their index in the
// cache (0 .. L-1), and new tokens sit at position L, so positions never leave the range the
// model was trained on: generation can run far past block_size with a cache of S + W tokens.
// Which tokens are kept is decided here; how they are stored (dense, or KIVI-quantised: then
// keys are quantised before rotation) by the store each layer gets from `store`. A layer
// bounded by its window (KvCache::window_keep) keeps only the last W - 1 of those, rotated so
// that they end at the index the other layers' newest token has (held()), which keeps each
// query's distance to them.
#pragma once
#include <vector>

#include "infer/kv_store.h"
#include "model/kv_cache.h"

namespace lmtrain::infer {

class StreamingKvCache : public model::KvCache {
 public:
  // S + W must leave room in block_size for a prompt chunk (checked by the caller).
  // store: one per layer (default: dense).
  StreamingKvCache(int64_t layers, int64_t sinks, int64_t window, model::RopeSpec rope,
                   const KvStoreFactory& store = {});
  int64_t next_position() const override { return held_; }
  int64_t room() const override;
  std::pair<at::Tensor, at::Tensor> update(int64_t layer, const at::Tensor& k,
                                           const at::Tensor& v) override;
  void advance(int64_t t) override;
  int64_t held() const override { return held_; }
  int64_t bytes() const override;

 private:
  std::vector<std::unique_ptr<KvStore>> layers_;  // keys unrotated
  int64_t sinks_, window_, held_ = 0;
  model::RopeSpec rope_;
};

}  // namespace lmtrain::infer
