// Heavy-Hitter Oracle (Zhang et al., 2023): per kv head, keep the R most recent tokens plus the
// older tokens that have drawn the most attention so far, at most B in all. The attention hands
// its weights to the cache (observe), which sums them per kv head (over the query heads of its
// group and over queries); when more than B tokens are held, each head keeps its R most recent
// and its B - R heaviest others, in position order. Positions stay absolute (keys rotated at
// insertion), so the model's block_size still bounds the sequence. A layer bounded by a window
// of W - 1 <= B tokens (KvCache::window_keep) keeps exactly its last W - 1 (what the window
// reads: exact); with W - 1 > B the budget already bounds it below the window and H2O chooses
// as before (over the held tokens, the window counted over them).
#pragma once
#include <vector>

#include "model/kv_cache.h"

namespace lmtrain::infer {

class H2oKvCache : public model::KvCache {
 public:
  H2oKvCache(int64_t layers, int64_t max_len, int64_t budget, int64_t recent, model::RopeSpec rope);
  int64_t next_position() const override { return length_; }
  int64_t room() const override { return max_len_ - length_; }
  std::pair<at::Tensor, at::Tensor> update(int64_t layer, const at::Tensor& k,
                                           const at::Tensor& v) override;
  bool wants_attention() const override { return true; }
  void observe(int64_t layer, const at::Tensor& weights) override;
  void advance(int64_t t) override;
  int64_t held() const override;
  int64_t bytes() const override;
  // (B, K, L) accumulated attention of the held tokens of `layer` (for tests).
  const at::Tensor& scores(int64_t layer) const { return score_[static_cast<size_t>(layer)]; }
  // (B, K, L) absolute positions of the held tokens of `layer`.
  const at::Tensor& positions(int64_t layer) const { return pos_[static_cast<size_t>(layer)]; }

 private:
  std::vector<at::Tensor> k_, v_, score_, pos_;  // per layer: (B,K,L,D) x2, (B,K,L) x2
  int64_t length_ = 0, max_len_, budget_, recent_;
  model::RopeSpec rope_;
};

}  // namespace lmtrain::infer
