#include "infer/ragged_kv_cache.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "core/error.h"
#include "core/log.h"

namespace lmtrain::infer {

RaggedKvCache::RaggedKvCache(const model::GptImpl& model, std::vector<int64_t> pad)
    : layers_(static_cast<size_t>(model.config().n_layer)),
      pad_rows_(std::move(pad)),
      max_len_(model.config().block_size),
      kv_heads_(model.config().kv_heads()),
      head_dim_(model.config().head_dim()),
      options_(model.transformer->wte->weight.options().requires_grad(false)),
      rope_(model.rope_spec()) {
  publish_padding();
}

void RaggedKvCache::publish_padding() {
  const bool padded =
      std::any_of(pad_rows_.begin(), pad_rows_.end(), [](int64_t p) { return p > 0; });
  // Once published the pads stay (an all-zero mask adds nothing); before, an unpadded batch
  // (one row alone, say) takes the model's unmasked path, the same as generate() alone.
  if (!padded && !left_padding().defined()) return;
  set_left_padding(at::tensor(pad_rows_, at::kLong).to(options_.device()));
}

at::Tensor RaggedKvCache::relayout(const at::Tensor& held, int64_t at, int64_t capacity) const {
  // Zeros: the pad slots a move creates are read (and masked) by the attention, and a masked
  // weight of exactly 0 times a NaN left in uninitialised memory would still be NaN.
  auto out = at::zeros({held.size(0), kv_heads_, capacity, head_dim_}, options_);
  out.narrow(2, at, held.size(2)).copy_(held);
  return out;
}

std::pair<at::Tensor, at::Tensor> RaggedKvCache::update(int64_t layer, const at::Tensor& k,
                                                        const at::Tensor& v) {
  const int64_t B = k.size(0), T = k.size(2);
  if (B != rows()) {
    throw Error(log::format("internal: a call of %lld rows on a RaggedKvCache of %lld",
                            (long long)B, (long long)rows()));
  }
  auto& l = layers_[static_cast<size_t>(layer)];
  if (!l.k.defined() || length_ + T > l.k.size(2)) {
    // Grow by doubling up to block_size, so that decoding reallocates O(log L) times. Slots past
    // length_ are written before they are read: no need to zero them.
    const int64_t capacity =
        std::min(max_len_, std::max(length_ + T, l.k.defined() ? 2 * l.k.size(2) : 64));
    auto nk = at::empty({B, kv_heads_, capacity, head_dim_}, options_);
    auto nv = at::empty_like(nk);
    if (length_ > 0) {
      nk.narrow(2, 0, length_).copy_(l.k.narrow(2, 0, length_));
      nv.narrow(2, 0, length_).copy_(l.v.narrow(2, 0, length_));
    }
    l.k = nk, l.v = nv;
  }
  l.k.narrow(2, length_, T).copy_(rotate(k, length_, rope_));
  l.v.narrow(2, length_, T).copy_(v);
  return {l.k.narrow(2, 0, length_ + T), l.v.narrow(2, 0, length_ + T)};  // (B, K, L, D)
}

void RaggedKvCache::keep_rows(const std::vector<int64_t>& keep) {
  std::vector<int64_t> pads;
  for (const auto r : keep) pads.push_back(pad_rows_.at(static_cast<size_t>(r)));
  // Slots every kept row has as padding: dropped, so S stays the longest row's length.
  const int64_t drop = pads.empty() ? length_ : *std::min_element(pads.begin(), pads.end());
  for (auto& p : pads) p -= drop;
  if (length_ > 0 && !keep.empty()) {
    const auto index = at::tensor(keep, at::kLong).to(options_.device());
    for (auto& l : layers_) {
      if (!l.k.defined()) continue;
      const int64_t capacity = l.k.size(2);
      l.k = relayout(l.k.narrow(2, drop, length_ - drop).index_select(0, index), 0, capacity);
      l.v = relayout(l.v.narrow(2, drop, length_ - drop).index_select(0, index), 0, capacity);
    }
  } else if (keep.empty()) {
    for (auto& l : layers_) l = Layer{};
  }
  length_ -= drop;
  pad_rows_ = std::move(pads);
  publish_padding();
}

void RaggedKvCache::join(RaggedKvCache&& other) {
  if (other.rows() == 0) return;
  if ((length_ == 0 && rows() > 0) || other.length_ == 0) {
    throw Error("internal: RaggedKvCache::join takes caches that have run their first call");
  }
  if (rows() == 0) {
    layers_ = std::move(other.layers_);
    pad_rows_ = std::move(other.pad_rows_);
    length_ = other.length_;
  } else {
    join_after(other);
  }
  other.layers_.assign(layers_.size(), Layer{});  // `other` is spent: no rows, no tokens
  other.pad_rows_.clear();
  other.length_ = 0;
  publish_padding();
}

void RaggedKvCache::join_after(const RaggedKvCache& other) {
  const int64_t S = std::max(length_, other.length_);
  const int64_t mine = S - length_, theirs = S - other.length_;  // slots each side moves right
  const int64_t B = rows(), Bo = other.rows();
  for (size_t i = 0; i < layers_.size(); ++i) {
    auto& l = layers_[i];
    const auto& o = other.layers_[i];
    const int64_t capacity = std::max({l.k.size(2), o.k.size(2), S});
    for (auto [dst, src] : {std::pair{&l.k, &o.k}, std::pair{&l.v, &o.v}}) {
      auto out = at::zeros({B + Bo, kv_heads_, capacity, head_dim_}, options_);
      out.narrow(0, 0, B).narrow(2, mine, length_).copy_(dst->narrow(2, 0, length_));
      out.narrow(0, B, Bo).narrow(2, theirs, other.length_).copy_(src->narrow(2, 0, other.length_));
      *dst = out;
    }
  }
  for (auto& p : pad_rows_) p += mine;
  for (const auto p : other.pad_rows_) pad_rows_.push_back(p + theirs);
  length_ = S;
}

int64_t RaggedKvCache::bytes() const {
  const int64_t per_slot =
      2 * rows() * kv_heads_ * head_dim_ * static_cast<int64_t>(options_.dtype().itemsize());
  int64_t n = 0;
  for (const auto& l : layers_) n += l.k.defined() ? length_ * per_slot : 0;
  return n;
}

}  // namespace lmtrain::infer
