#include "distributed/late_rows.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "kernels/lookup_rows_add.h"

namespace lmtrain::dist {

void LateRows::add(const at::Tensor& ids, const at::Tensor& rows) {
  ids_.push_back(ids.to(at::kLong));
  rows_.push_back(rows.to(grad_.scalar_type()));
}

void LateRows::start_exchange(Group& group) {
  const auto device = grad_.device();
  const int64_t width = grad_.size(1);
  auto ids = ids_.empty() ? at::empty({0}, grad_.options().dtype(at::kLong)) : at::cat(ids_);
  auto rows = rows_.empty() ? at::empty({0, width}, grad_.options()) : at::cat(rows_);
  ids_.clear();
  rows_.clear();
  // Counts first: ranks may differ (or have none); the rows go padded to the largest count.
  auto count = at::full({1}, ids.numel(), grad_.options().dtype(at::kLong));
  std::vector<at::Tensor> counts(group.size());
  for (auto& c : counts) c = at::empty_like(count);
  group.allgather(counts, count)->wait();
  int64_t most = 0;
  for (const auto& c : counts) most = std::max(most, c.item<int64_t>());
  all_ids_.clear();
  all_rows_.clear();
  if (most == 0) return;
  const int64_t pad = most - ids.numel();
  // Padding: id 0 with zero rows adds nothing.
  ids = at::cat({ids, at::zeros({pad}, ids.options())});
  rows = at::cat({rows, at::zeros({pad, width}, rows.options())});
  for (int r = 0; r < group.size(); ++r) {
    all_ids_.push_back(at::empty({most}, ids.options().device(device)));
    all_rows_.push_back(at::empty({most, width}, rows.options()));
  }
  ids_work_ = group.allgather(all_ids_, ids);
  rows_work_ = group.allgather(all_rows_, rows);
}

void LateRows::add_mean(Group& group) {
  if (!ids_work_) return;
  ids_work_->wait();
  rows_work_->wait();
  ids_work_.reset();
  rows_work_.reset();
  // In rank order (kernels/lookup_rows_add.h: deterministic, the same sum on every rank).
  kernels::add_lookup_rows(grad_, at::cat(all_ids_), at::cat(all_rows_), 1.0 / group.size());
  all_ids_.clear();
  all_rows_.clear();
}

}  // namespace lmtrain::dist
