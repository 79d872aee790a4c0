// Small agreements between the ranks of a group on host values: a stop flag, a counter, a
// verdict that every rank must act on. CPU tensors, so under NCCL they go through the group's
// Gloo companion and never wait for the GPU.
#pragma once
#include <string>

#include "distributed/group.h"

namespace lmtrain::dist {

// True on every rank when any rank asks for a stop (so all ranks stop at the same step).
bool any_rank(Group& group, bool flag);
// The largest `value` (>= 0, small) of all ranks, on every rank.
int max_over_ranks(Group& group, int value);
// Rank `root`'s `text` on every rank (e.g. a verdict that every rank must act on).
std::string broadcast_text(Group& group, const std::string& text, int root);

}  // namespace lmtrain::dist
