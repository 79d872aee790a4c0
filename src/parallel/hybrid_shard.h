// HSDP (dist.shard_group_size = G, with dist.zero=3): the world's ranks form groups of G
// consecutive ranks (one node, say); parameters, gradients and optimizer state are sharded
// within a group as ZeRO-3 shards them over the world, and the W/G groups are replicas of each
// other: a shard's gradient is reduce-scattered within the group, then all-reduced over the
// ranks that hold the same shard (parallel/fully_shard.h).
//
// Group layout (every rank calls Group::split for every group in the same order):
//   shard group g     = ranks [g G, (g+1) G)            (all-gathers, reduce-scatters)
//   replica group i   = ranks {i, i + G, i + 2 G, ...}   (shard gradients all-reduced)
#pragma once
#include <memory>

#include "distributed/group.h"

namespace lmtrain::parallel {

struct ShardGroups {
  std::unique_ptr<dist::Group> shard;     // null: shard over the world
  std::unique_ptr<dist::Group> replicas;  // null: no replicas
  // The group the parameters are sharded over.
  dist::Group& shard_group(dist::Group& world) const { return shard ? *shard : world; }
};

// G = 0 or the world's size: no sub-groups. Otherwise G must divide the world (the error names
// dist.shard_group_size).
ShardGroups make_shard_groups(dist::Group& world, int g);

}  // namespace lmtrain::parallel
