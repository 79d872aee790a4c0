#include "model/expert_groups.h"

#include <ATen/ATen.h>

#include <utility>

namespace lmtrain::model {

ExpertGroups::ExpertGroups(std::vector<int64_t> counts)
    : host_(std::move(counts)), have_host_(true) {}

ExpertGroups ExpertGroups::on_device(const at::Tensor& counts) {
  ExpertGroups g;
  g.device_ = counts.to(at::kLong);
  return g;
}

int64_t ExpertGroups::size() const {
  return have_host_ ? static_cast<int64_t>(host_.size()) : device_.size(0);
}

const std::vector<int64_t>& ExpertGroups::host() const {
  if (!have_host_) {
    const at::Tensor c = device_.cpu().contiguous();
    host_.assign(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
    have_host_ = true;
  }
  return host_;
}

at::Tensor ExpertGroups::offsets(const at::Device& device) const {
  if (device_.defined()) return at::cumsum(device_, 0, at::kInt).to(device);
  std::vector<int32_t> offs(host_.size());
  int64_t total = 0;
  for (size_t e = 0; e < host_.size(); ++e) offs[e] = static_cast<int32_t>(total += host_[e]);
  return at::tensor(offs, at::TensorOptions().dtype(at::kInt)).to(device, /*non_blocking=*/true);
}

}  // namespace lmtrain::model
