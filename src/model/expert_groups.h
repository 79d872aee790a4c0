// How many of the expert-sorted rows each expert gets: the group sizes an MoE layer's grouped
// GEMMs and its dispatcher work from.
//
// The router counts its assignments on the rows' device. A grouped GEMM (at::_grouped_mm) takes
// the groups as cumulative offsets on that device, so with every expert local and no capacity
// limit the counts never need to reach the host: no GPU-to-host read per layer, nothing that
// stops a CUDA graph. Whatever does need them on the host (the per-expert GEMM loop, the
// expert-parallel exchange's splits, capacity) asks for host(), which reads them once.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace lmtrain::model {

class ExpertGroups {
 public:
  // Counts known on the host (the expert-parallel dispatcher, tests).
  ExpertGroups(std::vector<int64_t> counts);  // NOLINT: implicit, a vector is a set of groups
  // Counts (E) int64 on the rows' device, read to the host only if asked.
  static ExpertGroups on_device(const at::Tensor& counts);

  int64_t size() const;  // E
  // Whether the counts are on the host already (host() costs nothing).
  bool on_host() const { return have_host_; }
  // The counts on the host; the first call reads them from the device (a GPU sync).
  const std::vector<int64_t>& host() const;
  // (E) int32 cumulative ends on `device`: from the device counts without a host read, or from
  // the host counts.
  at::Tensor offsets(const at::Device& device) const;

 private:
  ExpertGroups() = default;
  at::Tensor device_;  // (E) int64, or undefined for host-made groups
  mutable std::vector<int64_t> host_;
  mutable bool have_host_ = false;
};

}  // namespace lmtrain::model
