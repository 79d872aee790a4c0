// Small agreements between the ranks of a group on host values: a stop flag, a counter, a
// verdict that every rank must act on. CPU tensors, so under NCCL they go through the group's
// Gloo companion and never wait for the GPU.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "distributed/group.h"

namespace lmtrain::dist {

// True on every rank when any rank asks for a stop (so all ranks stop at the same step).
bool any_rank(Group& group, bool flag);
// The largest `value` (>= 0, small) of all ranks, on every rank.
int max_over_ranks(Group& group, int value);
// Every rank's `values` (the same count on each), rank after rank: (size() * values.size()).
std::vector<int64_t> all_gather_values(Group& group, const std::vector<int64_t>& values);
// Rank `root`'s `text` on every rank (e.g. a verdict that every rank must act on).
std::string broadcast_text(Group& group, const std::string& text, int root);

}  // namespace lmtrain::dist
