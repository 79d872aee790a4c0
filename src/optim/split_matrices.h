// What an optimizer that needs whole matrices (Muon's Newton-Schulz) must know of tensor
// parallelism (parallel/tp_split_matrices.h): the TP group's ranks each hold a piece of every
// block matrix, and the gradient norm must count each piece once and each parameter every TP
// rank holds whole once. The optimizer layer sees only this interface, not the parallel plan.
#pragma once
#include <ATen/core/Tensor.h>

#include <string>

namespace lmtrain::optim {

class SplitMatrices {
 public:
  virtual ~SplitMatrices() = default;
  // T: the ranks each matrix is split over.
  virtual int parts() const = 0;
  // Whether parameter `name` is split (else every TP rank holds it whole).
  virtual bool split(const std::string& name) const = 0;
  // The whole matrix of parameter `name` from this rank's piece (same shape and layout as the
  // parameter's piece). Collective over the TP group: every TP rank calls it for the same
  // names in the same order.
  virtual at::Tensor gather(const std::string& name, const at::Tensor& piece) = 0;
  // This rank's piece of a whole matrix of parameter `name`.
  virtual at::Tensor piece(const std::string& name, const at::Tensor& whole) const = 0;
  // Sums `t` over the TP group, in place.
  virtual void sum(at::Tensor& t) = 0;
};

}  // namespace lmtrain::optim
