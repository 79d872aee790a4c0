// How an MoE layer reaches its experts. The layer sorts its token rows by expert and hands them
// to the dispatcher with a function that runs the experts this process holds; the dispatcher
// returns every row's expert output in the same order. Model code makes no collective call: the
// local dispatcher (here) calls the experts directly, the expert-parallel one (train/) sends rows
// to the ranks that hold their experts and brings the results back.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "model/expert_groups.h"

namespace lmtrain::model {

// rows (R, C) sorted by local expert, groups: rows per local expert -> (R, C) outputs.
using ExpertCompute = std::function<at::Tensor(const at::Tensor& rows, const ExpertGroups& groups)>;

// Experts [first, first + count) of num_experts live in this process.
struct ExpertPlacement {
  int64_t first = 0;
  int64_t count = 0;
};

class ExpertDispatcher {
 public:
  virtual ~ExpertDispatcher() = default;
  // rows (M, C) sorted by global expert, groups (num_experts) -> (M, C).
  virtual at::Tensor run(const at::Tensor& rows, const ExpertGroups& groups,
                         const ExpertCompute& compute) = 0;
};

// Every expert is local.
class LocalExpertDispatcher : public ExpertDispatcher {
 public:
  at::Tensor run(const at::Tensor& rows, const ExpertGroups& groups,
                 const ExpertCompute& compute) override {
    return compute(rows, groups);
  }
};

}  // namespace lmtrain::model
