// ZeRO-3 (parallel/fully_shard.h) over MoE blocks: what of an MoE layer a block unit gathers,
// and in which dtype.
//
// Without expert parallelism (dist.ep=1) an MoE block is a unit like a dense one: its router,
// expert stacks (num_experts, ...) and shared experts are sharded with it and gathered around
// its forward and backward. Under expert parallelism the expert stacks (E_local, ...) differ
// between EP ranks and stay out of the units: each rank keeps its experts whole and local
// (FlatParams::keep_shard's keep_experts), the all-to-all brings them their tokens, and their
// gradients are averaged over the ranks holding the same experts, as under ZeRO-2 with EP;
// only the shared region [0, expert_begin) is sharded, as ZeroAdamW shards it. Under HSDP the
// shared region is sharded within the shard group (its gradient then averaged over the
// replicas); the experts' placement and averaging do not depend on the shard groups.
#pragma once
#include <string>
#include <vector>

#include "optim/flat_params.h"
#include "parallel/shard_units.h"

namespace lmtrain::parallel {

// The units without the expert region [flat.expert_begin(), numel): ranges cut at
// expert_begin, expert segments dropped, buffer sizes recomputed (expert parallelism).
std::vector<ShardUnit> units_without_experts(const std::vector<ShardUnit>& units,
                                             const optim::FlatParams& flat);

// Whether a bf16 run gathers a parameter in bf16 (fully_shard.h's wire dtype), by its name and
// block_matrix tag: the blocks' linear weights, which autocast casts to bf16 before every use,
// but not an MoE router's, which the layer reads in fp32 (model/moe.cpp: small logit
// differences decide the experts). lmtrain plan's traffic counts the same (train/memory_plan.h).
bool gathered_in_compute_dtype(const std::string& name, bool block_matrix);

}  // namespace lmtrain::parallel
