// Gradient rows of one parameter that arrive after its bucket went out: the token lookup's part
// of a tied table (model/deferred_lookup.h), n rows of (V, C) for n tokens. GradSync keeps them
// for the step and, after backward, exchanges them among the ranks (an all-gather of the ids and
// the rows, padded to the largest count) and adds their mean into the averaged gradient. The
// exchange runs whether or not this rank has rows, so every rank issues the same collectives.
#pragma once
#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "distributed/group.h"

namespace lmtrain::dist {

class LateRows {
 public:
  // The parameter's gradient (V, C): a view of the flat buffer.
  explicit LateRows(at::Tensor grad) : grad_(std::move(grad)) {}

  void add(const at::Tensor& ids, const at::Tensor& rows);  // (n,) int64, (n, C)
  // After backward: exchanges the counts (waits for them), then starts the all-gathers.
  void start_exchange(Group& group);
  // Once the parameter's bucket is averaged: waits, adds the ranks' mean, and clears the step.
  void add_mean(Group& group);

 private:
  at::Tensor grad_;
  std::vector<at::Tensor> ids_, rows_;  // this step's, in backward order
  std::vector<at::Tensor> all_ids_, all_rows_;
  std::shared_ptr<Work> ids_work_, rows_work_;
};

}  // namespace lmtrain::dist
