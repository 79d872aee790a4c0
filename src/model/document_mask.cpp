#include "model/document_mask.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/torch_compat.h"
#include "model/dropout.h"

namespace lmtrain::model {

DocumentLayout::DocumentLayout(const at::Tensor& doc) {
  if (doc.dim() != 2) throw Error("document layout: documents must be (B, T)");
  doc_ = doc.to(at::kLong);
  const int64_t B = doc_.size(0), T = doc_.size(1);
  // A document starts where the index changes (and at t = 0): positions = t - that start,
  // found by a running maximum of the starts' indices. (B, T) each.
  auto t = at::arange(T, doc_.options()).expand({B, T});
  auto is_start = at::ones({B, T}, doc_.options().dtype(at::kBool));
  if (T > 1) {
    is_start.narrow(1, 1, T - 1).copy_(doc_.narrow(1, 1, T - 1) != doc_.narrow(1, 0, T - 1));
  }
  auto start_at = at::where(is_start, t, at::zeros_like(t));
  positions_ = t - std::get<0>(at::cummax(start_at, 1));
  if (doc_.device().is_cpu()) {
    bounds_ = document_bounds(doc_);
    longest_ = longest_document(bounds_);
  }
}

std::vector<std::vector<int64_t>> document_bounds(const at::Tensor& doc_in) {
  auto d = doc_in.to(at::kLong).contiguous();
  auto a = d.accessor<int64_t, 2>();
  const int64_t B = d.size(0), T = d.size(1);
  std::vector<std::vector<int64_t>> bounds(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    auto& row = bounds[static_cast<size_t>(b)];
    for (int64_t j = 0; j < T; ++j) {
      if (j > 0 && a[b][j] < a[b][j - 1]) {
        throw Error("document layout: document indices decrease along a row");
      }
      if (j == 0 || a[b][j] != a[b][j - 1]) row.push_back(j);
    }
    row.push_back(T);
  }
  return bounds;
}

int64_t longest_document(const std::vector<std::vector<int64_t>>& bounds) {
  int64_t longest = 0;
  for (const auto& row : bounds) {
    for (size_t k = 0; k + 1 < row.size(); ++k) longest = std::max(longest, row[k + 1] - row[k]);
  }
  return longest;
}

at::Tensor DocumentLayout::additive_mask(int64_t window, const at::TensorOptions& opts) const {
  const auto key = std::make_pair(window, static_cast<int>(opts.dtype().toScalarType()));
  std::lock_guard<std::mutex> lock(cache_->mu);
  auto it = cache_->masks.find(key);
  if (it != cache_->masks.end()) return it->second;
  const int64_t T = doc_.size(1);
  auto i = at::arange(T, doc_.options()).unsqueeze(1);  // (T, 1) queries
  auto j = at::arange(T, doc_.options()).unsqueeze(0);  // (1, T) keys
  auto allowed = j <= i;                                // (T, T)
  if (window > 0) allowed = allowed & (i - j < window);
  // (B, T, T): also in the same document.
  allowed = allowed.unsqueeze(0) & (doc_.unsqueeze(2) == doc_.unsqueeze(1));
  const double inf = std::numeric_limits<double>::infinity();
  auto mask = at::zeros(allowed.sizes(), opts.device(doc_.device()))
                  .masked_fill_(allowed.logical_not(), -inf)
                  .unsqueeze(1);  // (B, 1, T, T)
  cache_->masks.emplace(key, mask);
  return mask;
}

at::Tensor document_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              double dropout_p, const DocumentLayout& docs, int64_t window) {
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3), K = k.size(1);
  const at::Tensor mask = docs.additive_mask(window, q.options());  // (B, 1, T, T)
  if (dropout_p == 0) return compat::masked_sdpa(q, k, v, mask);
  at::Tensor kh = K < H ? k.repeat_interleave(H / K, 1) : k;
  at::Tensor vh = K < H ? v.repeat_interleave(H / K, 1) : v;
  // (B*H, T, D) x (B*H, D, T) -> scores (B*H, T, T) = mask + scale q k^T
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  auto scores =
      at::baddbmm(mask.expand({B, H, T, T}).reshape({B * H, T, T}), q.reshape({B * H, T, D}),
                  kh.reshape({B * H, T, D}).transpose(1, 2), 1.0, scale);
  // Dropped as (B, H, T, T), the same memory order: a split run's heads are dim 1.
  auto weights = dropout(at::softmax(scores, -1).view({B, H, T, T}), dropout_p).view({B * H, T, T});
  return at::bmm(weights, vh.reshape({B * H, T, D})).view({B, H, T, D});
}

at::Tensor documents_from_end_token(const at::Tensor& ids, int64_t end_token) {
  // Document index = end tokens strictly before t (an exclusive running count).
  auto is_end = (ids == end_token).to(at::kLong);
  return at::cumsum(is_end, 1) - is_end;
}

}  // namespace lmtrain::model
