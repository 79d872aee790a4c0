// Packed rows: several documents (conversations, or the documents of a token window) in one row
// of a batch. Attention never crosses a document boundary and positions (RoPE, learned position
// embeddings, nanochat's smear) restart at each document, so every document is computed as if it
// were alone in its row.
//
// A layout is made from the batch's "documents" tensor (B, T): a document index per token that
// never decreases along a row (0 0 0 1 1 2 2 2 ...). It is built on the batch's device without
// host reads except, for CPU tensors, the row boundaries the fused CPU attention kernel walks.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace lmtrain::model {

class DocumentLayout {
 public:
  // doc: (B, T) integer, non-decreasing along each row (not checked on the device).
  explicit DocumentLayout(const at::Tensor& doc);

  const at::Tensor& doc() const { return doc_; }              // (B, T) int64
  const at::Tensor& positions() const { return positions_; }  // (B, T) int64, 0 at each start
  // CPU layouts: for each row, where its documents start, then T. Empty on other devices.
  const std::vector<std::vector<int64_t>>& bounds() const { return bounds_; }
  // The longest document of any row (CPU layouts; 0 elsewhere).
  int64_t longest() const { return longest_; }

  // The additive mask (B, 1, T, T) in opts' dtype and device: 0 where query i may attend key j
  // (same document, j <= i, and i - j < window when window > 0), -inf elsewhere. Inside one
  // document the distance of two tokens is their distance in the row, so a sliding window keeps
  // its meaning. Cached per (window, dtype); copies of a layout share the cache.
  at::Tensor additive_mask(int64_t window, const at::TensorOptions& opts) const;

 private:
  at::Tensor doc_, positions_;
  std::vector<std::vector<int64_t>> bounds_;
  int64_t longest_ = 0;
  struct MaskCache {
    std::mutex mu;
    std::map<std::pair<int64_t, int>, at::Tensor> masks;
  };
  std::shared_ptr<MaskCache> cache_ = std::make_shared<MaskCache>();
};

// Attention of q (B, H, T, D) over k, v (B, K, T, D) (K divides H: grouped-query attention)
// within each document of `docs`, causal, with a sliding window when window > 0. Without
// dropout SDPA gets the layout's dense additive mask (on CPU its flash kernel, on CUDA the
// memory-efficient or cuDNN kernel: libtorch's flash kernel takes no mask); with dropout the
// explicit path (scores + mask, softmax, dropout, weights @ v). Returns (B, H, T, D).
at::Tensor document_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              double dropout_p, const DocumentLayout& docs, int64_t window);

// For each row of CPU document indices (B, T): where its documents start, then T. Throws when
// an index decreases along a row.
std::vector<std::vector<int64_t>> document_bounds(const at::Tensor& doc);
// The longest document of such bounds.
int64_t longest_document(const std::vector<std::vector<int64_t>>& bounds);

// Document indices (B, T) int64 of token windows ids (B, T) whose documents end with
// `end_token` (`lmtrain prepare` appends <|endoftext|> to every document): a document is the
// tokens after the previous end token up to and including its own. A row's tokens before its
// first end token form document 0 (the rest of a document that began in an earlier window).
at::Tensor documents_from_end_token(const at::Tensor& ids, int64_t end_token);

}  // namespace lmtrain::model
