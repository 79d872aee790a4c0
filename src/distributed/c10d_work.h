// The pieces every c10d collective of dist::Group shares (distributed/c10d_group.cpp): the
// reduce op as c10d names it, several tensors as one flat one, and the wrapper of an in-flight
// c10d collective that rethrows its failure naming the rank and the collective.
#pragma once
#include <ATen/core/Tensor.h>

#include <functional>
#include <string>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

#include "distributed/group.h"

namespace lmtrain::dist {

// ReduceOp as c10d takes it (AVG as SUM: Gloo has none, C10dWork's `finish` divides).
c10d::ReduceOp to_c10d(ReduceOp op);

// The tensors as one flat tensor: a view when they already lie back to back in one contiguous
// buffer (GradSync's bucket parts), else a packed copy.
at::Tensor concatenated(const std::vector<at::Tensor>& tensors);

// Gloo's reduce-scatter after its all-to-all: `received` holds the `size` equal chunks sent to
// this rank, in rank order, reduced into `output` (as many elements as a chunk) always in that
// order, so every run sums identically.
void reduce_in_rank_order(const at::Tensor& received, at::Tensor& output, ReduceOp op, int size);

// Wraps an in-flight c10d collective; `finish` runs after it completes (e.g. the AVG divide).
class C10dWork : public Work {
 public:
  C10dWork(c10::intrusive_ptr<c10d::Work> work, std::string what, std::function<void()> finish)
      : work_(std::move(work)), what_(std::move(what)), finish_(std::move(finish)) {}

  void wait() override;
  void on_complete(std::function<void()> callback) override;

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  std::string what_;
  std::function<void()> finish_;
  bool done_ = false;
};

}  // namespace lmtrain::dist
