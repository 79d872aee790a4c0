#include "parallel/moe_shard.h"

#include <algorithm>
#include <string>

namespace lmtrain::parallel {

std::vector<ShardUnit> units_without_experts(const std::vector<ShardUnit>& units,
                                             const optim::FlatParams& flat) {
  const int64_t end = flat.expert_begin();
  const auto& segs = flat.segments();
  std::vector<ShardUnit> out(units.size());
  for (size_t u = 0; u < units.size(); ++u) {
    ShardUnit& unit = out[u];
    for (const auto& [lo, hi] : units[u].ranges) {
      // The padding before expert_begin belongs to the segment before it: a range may run
      // into the region only when that segment and the first expert stack share a unit.
      if (lo < end) unit.ranges.emplace_back(lo, std::min(hi, end));
    }
    for (size_t i : units[u].segments) {
      if (!segs[i].expert) unit.segments.push_back(i);
    }
    for (const auto& [lo, hi] : unit.ranges) unit.numel += hi - lo;
  }
  return out;
}

bool gathered_in_compute_dtype(const std::string& name, bool block_matrix) {
  static const std::string router = ".mlp.router.weight";
  const bool is_router = name.size() >= router.size() &&
                         name.compare(name.size() - router.size(), router.size(), router) == 0;
  return block_matrix && !is_router;
}

}  // namespace lmtrain::parallel
