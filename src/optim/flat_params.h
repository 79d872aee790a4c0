// Moves every parameter of a model into one contiguous fp32 buffer (and its gradient into
// another), leaving each parameter a view of its slice. The optimizer then updates the whole
// model in a handful of vectorised ops instead of a loop over dozens of small tensors, gradient
// zeroing and clipping become one op each, and gradient-sync buckets are plain slices.
// Layout: parameters that get weight decay first, then the rest, each segment aligned to 16
// elements; `decay_numel` marks the boundary.
#pragma once
#include <torch/nn/module.h>

#include <functional>
#include <string>
#include <vector>

namespace lmtrain::optim {

struct ParamSegment {
  std::string name;
  int64_t offset = 0;  // in elements, into FlatParams::params
  int64_t numel = 0;
  std::vector<int64_t> shape;
  bool decay = false;
};

class FlatParams {
 public:
  FlatParams(torch::nn::Module& module, const std::function<bool(const std::string&)>& decays);

  const std::vector<ParamSegment>& segments() const { return segments_; }
  const torch::Tensor& params() const { return params_; }  // (numel,)
  const torch::Tensor& grads() const { return grads_; }    // (numel,)
  int64_t numel() const { return params_.numel(); }
  int64_t decay_numel() const { return decay_numel_; }
  int64_t num_parameters() const;  // real elements, without alignment padding

  // Views of one parameter's slice of `flat` (params, grads or an optimizer state buffer).
  torch::Tensor view(const torch::Tensor& flat, const ParamSegment& seg) const;
  const ParamSegment& segment(const std::string& name) const;

  void zero_grad() { grads_.zero_(); }
  // Global L2 norm of all gradients.
  double grad_norm() const;

 private:
  std::vector<ParamSegment> segments_;
  torch::Tensor params_, grads_;
  int64_t decay_numel_ = 0;
};

}  // namespace lmtrain::optim
