#include "infer/h2o_kv_cache.h"

#include <ATen/ATen.h>

#include "model/rope.h"

namespace lmtrain::infer {

H2oKvCache::H2oKvCache(int64_t layers, int64_t max_len, int64_t budget, int64_t recent,
                       model::RopeSpec rope)
    : k_(static_cast<size_t>(layers)),
      v_(static_cast<size_t>(layers)),
      score_(static_cast<size_t>(layers)),
      pos_(static_cast<size_t>(layers)),
      max_len_(max_len),
      budget_(budget),
      recent_(recent),
      rope_(rope) {}

std::pair<at::Tensor, at::Tensor> H2oKvCache::update(int64_t layer, const at::Tensor& k,
                                                     const at::Tensor& v) {
  const auto l = static_cast<size_t>(layer);
  const int64_t B = k.size(0), K = k.size(1), T = k.size(2);
  auto kr = rope_.enabled ? model::apply_rope(k, length_, rope_.params) : k;
  auto pos = at::arange(length_, length_ + T, at::TensorOptions().dtype(at::kLong))
                 .to(k.device())
                 .expand({B, K, T});
  auto zeros = at::zeros({B, K, T}, k.options().dtype(at::kFloat));
  k_[l] = k_[l].defined() ? at::cat({k_[l], kr}, 2) : kr.clone();
  v_[l] = v_[l].defined() ? at::cat({v_[l], v}, 2) : v.clone();
  score_[l] = score_[l].defined() ? at::cat({score_[l], zeros}, 2) : zeros;
  pos_[l] = pos_[l].defined() ? at::cat({pos_[l], pos}, 2) : pos.contiguous();
  return {k_[l], v_[l]};
}

void H2oKvCache::observe(int64_t layer, const at::Tensor& weights) {
  // weights (B, H, Tq, L): summed over queries, then over the query heads of each kv head.
  auto& s = score_[static_cast<size_t>(layer)];
  const int64_t B = s.size(0), K = s.size(1), L = s.size(2);
  auto per_head = weights.to(at::kFloat).sum(2);  // (B, H, L)
  s.add_(per_head.view({B, K, -1, L}).sum(2));
}

void H2oKvCache::advance(int64_t t) {
  length_ += t;
  for (size_t l = 0; l < k_.size(); ++l) {
    const int64_t L = k_[l].size(2);
    const int64_t window_kept = window_keep(static_cast<int64_t>(l));
    if (window_kept > 0 && window_kept <= budget_) {
      // A window within the budget: the layer keeps the last W - 1 tokens, the same for every
      // head (the window reads no others), and evicts nothing else; clone() frees the rest.
      if (L > window_kept) {
        for (auto* t : {&k_[l], &v_[l], &score_[l], &pos_[l]}) {
          *t = t->narrow(2, L - window_kept, window_kept).clone();
        }
      }
      continue;
    }
    if (L <= budget_) continue;
    // Older tokens compete on accumulated attention; the R most recent always stay.
    auto older = score_[l].narrow(2, 0, L - recent_);
    auto heavy = std::get<1>(older.topk(budget_ - recent_, 2));  // (B, K, B - R)
    auto recent =
        at::arange(L - recent_, L, heavy.options()).expand({heavy.size(0), heavy.size(1), recent_});
    auto keep = std::get<0>(at::cat({heavy, recent}, 2).sort(2));  // position order
    auto idx4 = keep.unsqueeze(-1).expand({-1, -1, -1, k_[l].size(3)});
    k_[l] = k_[l].gather(2, idx4);
    v_[l] = v_[l].gather(2, idx4);
    score_[l] = score_[l].gather(2, keep);
    pos_[l] = pos_[l].gather(2, keep);
  }
}

int64_t H2oKvCache::held() const { return k_.empty() || !k_[0].defined() ? 0 : k_[0].size(2); }

int64_t H2oKvCache::bytes() const {
  int64_t n = 0;
  for (size_t l = 0; l < k_.size(); ++l) {
    if (k_[l].defined()) n += (k_[l].numel() + v_[l].numel()) * k_[l].element_size();
  }
  return n;
}

}  // namespace lmtrain::infer
