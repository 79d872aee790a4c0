#include "infer/dense_kv_store.h"

#include <ATen/ATen.h>

namespace lmtrain::infer {

at::Tensor keep_token_ranges(const at::Tensor& x, const std::vector<TokenRange>& ranges) {
  std::vector<at::Tensor> parts;
  for (const auto& r : ranges) {
    if (r.end > r.begin) parts.push_back(x.narrow(2, r.begin, r.end - r.begin));
  }
  if (parts.size() == 1 && parts[0].size(2) == x.size(2)) return x;
  // cat copies, so the dropped tokens' memory is released.
  return parts.empty() ? x.narrow(2, 0, 0).clone() : at::cat(parts, 2);
}

void DenseKvStore::append(const at::Tensor& k, const at::Tensor& v) {
  k_ = k_.defined() ? at::cat({k_, k}, 2) : k.clone();
  v_ = v_.defined() ? at::cat({v_, v}, 2) : v.clone();
}

std::pair<at::Tensor, at::Tensor> DenseKvStore::read(at::ScalarType dtype) const {
  return {k_.to(dtype), v_.to(dtype)};
}

void DenseKvStore::keep(const std::vector<TokenRange>& ranges) {
  if (!k_.defined()) return;
  k_ = keep_token_ranges(k_, ranges);
  v_ = keep_token_ranges(v_, ranges);
}

int64_t DenseKvStore::bytes() const {
  return k_.defined() ? (k_.numel() + v_.numel()) * k_.element_size() : 0;
}

}  // namespace lmtrain::infer
