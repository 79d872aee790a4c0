#include "parallel/hybrid_shard.h"

#include <vector>

#include "core/error.h"
#include "core/log.h"

namespace lmtrain::parallel {

ShardGroups make_shard_groups(dist::Group& world, int g) {
  ShardGroups out;
  const int w = world.size();
  if (g == 0 || g == w) return out;
  if (g < 2 || w % g != 0) {
    throw UsageError(log::format(
        "config key 'dist.shard_group_size' = %d: give 0 (the world) or a divisor >= 2 of the "
        "world of %d ranks",
        g, w));
  }
  for (int first = 0; first < w; first += g) {
    std::vector<int> ranks;
    for (int r = first; r < first + g; ++r) ranks.push_back(r);
    if (auto sub = world.split(ranks)) out.shard = std::move(sub);
  }
  for (int i = 0; i < g; ++i) {
    std::vector<int> ranks;
    for (int r = i; r < w; r += g) ranks.push_back(r);
    if (auto sub = world.split(ranks)) out.replicas = std::move(sub);
  }
  return out;
}

}  // namespace lmtrain::parallel
