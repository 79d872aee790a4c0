// The exact KV cache of continuous batching (serve/continuous_batch.h): rows join and leave a
// running batch between decode steps, each at its own length.
//
// Layout: left padding, as the static batch has it (model/kv_cache.h). Every row writes its
// next token at the same slot S, so one (B, 1) decode call serves every row; row b holds slots
// pad[b]..S-1 at positions 0..S-1-pad[b], exactly where it would sit alone, and the model masks
// its pad slots. Rows joining move to the right end (their pad is S - length; when a newcomer is
// longer than S, every running row's pad grows instead), rows leaving are cut out, and the slots
// no row uses any more are trimmed, so S stays the longest row's length. Keys are held rotated
// at their row's positions, which a move does not change: nothing is recomputed.
//
// Why not per-row lengths written at per-row offsets (vLLM's paged or varlen attention)? That
// needs a varlen attention kernel and scattered writes on each backend we run (CPU and CUDA),
// where left padding needs only the masked dense kernels the model already has. Its cost is a
// copy of the cache when rows join or leave (O(B S) per layer, once per request, the same as one
// decode step's reads) and the pad slots' share of the buffers, bounded by the trimming.
// The cache keeps every token of a windowed layer (the attention's window mask hides the old
// ones, as --kv_cache=full:window_bound=0 does), so rows can be cut and moved freely.
#pragma once
#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "model/gpt.h"
#include "model/kv_cache.h"

namespace lmtrain::infer {

class RaggedKvCache : public model::KvCache {
 public:
  // A cache for `model`'s layers; `pad`: one entry per row, the left padding of the prompts its
  // first call brings (all 0 or empty: the rows are unpadded, the model's unmasked path).
  RaggedKvCache(const model::GptImpl& model, std::vector<int64_t> pad);

  int64_t rows() const { return static_cast<int64_t>(pad_rows_.size()); }
  const std::vector<int64_t>& row_padding() const { return pad_rows_; }
  // Keeps the rows `keep` (ascending indices), in that order; the others leave. Then drops the
  // leading slots that are padding in every kept row.
  void keep_rows(const std::vector<int64_t>& keep);
  // Appends `other`'s rows after this cache's (both hold whole calls: advance() was called). The
  // one with fewer slots is padded on the left to the other's length.
  void join(RaggedKvCache&& other);

  int64_t next_position() const override { return length_; }
  int64_t room() const override { return max_len_ - length_; }
  std::pair<at::Tensor, at::Tensor> update(int64_t layer, const at::Tensor& k,
                                           const at::Tensor& v) override;
  void advance(int64_t t) override { length_ += t; }
  int64_t held() const override { return length_; }
  int64_t bytes() const override;
  bool supports_padding() const override { return true; }

 private:
  struct Layer {
    at::Tensor k, v;  // (B, K, capacity, D): slots 0..length_-1 hold tokens or padding
  };
  std::vector<Layer> layers_;
  std::vector<int64_t> pad_rows_;  // per row: its pad slots
  int64_t length_ = 0, max_len_, kv_heads_, head_dim_;
  at::TensorOptions options_;
  model::RopeSpec rope_;
  // Hands the pads to the model's mask and positions (once any row is padded).
  void publish_padding();
  // join() into a cache that has rows: both sides move right to the longer one's length.
  void join_after(const RaggedKvCache& other);
  // New zeroed (B, K, capacity, D) buffers holding `held` ((B, K, n, D)) at slots from `at`.
  at::Tensor relayout(const at::Tensor& held, int64_t at, int64_t capacity) const;
};

}  // namespace lmtrain::infer
