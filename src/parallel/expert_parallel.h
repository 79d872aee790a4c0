// Expert parallelism (dist.ep): the world's ranks form groups of `ep` consecutive ranks; the
// ranks of one group split every MoE layer's experts between them (rank i of the group holds
// experts [i E/ep, (i+1) E/ep)), and the world/ep groups are data-parallel replicas of each
// other. Tokens reach their experts through AllToAllExpertDispatcher; gradients of the expert
// stacks are averaged over the replica group only (TrainStepper), everything else over the
// world as without EP.
//
// Group layout (every rank calls Group::split for every group in the same order):
//   EP group g        = ranks [g ep, (g+1) ep)             (token exchange)
//   replica group i   = ranks {i, i + ep, i + 2 ep, ...}   (expert gradient averaging)
#pragma once
#include <memory>
#include <vector>

#include "distributed/all_to_all_autograd.h"
#include "distributed/group.h"
#include "model/expert_dispatcher.h"
#include "optim/optimizer.h"

namespace lmtrain::model {
class GptImpl;
}

namespace lmtrain::train {

struct ExpertParallel {
  int ep = 1;
  int ep_rank = 0;                             // index in the EP group
  std::unique_ptr<dist::Group> ep_group;       // the ep ranks that share the experts
  std::unique_ptr<dist::Group> replica_group;  // the world/ep ranks holding the same experts
  model::ExpertPlacement placement;            // this rank's experts

  bool active() const { return ep > 1; }
};

// Validates dist.ep against the world and model (errors name the keys) and makes the groups.
// ep = 1 gives an inactive ExpertParallel holding every expert.
ExpertParallel make_expert_parallel(dist::Group& world, int64_t ep, int64_t num_experts);

// Sends each row to the EP rank holding its expert (counts exchanged first, then an uneven
// all-to-all), runs this rank's experts on what it received, and sends the results back; the
// backward pass goes through the same exchanges reversed (dist::all_to_all_autograd).
class AllToAllExpertDispatcher : public model::ExpertDispatcher {
 public:
  AllToAllExpertDispatcher(dist::Group& ep_group, int64_t num_experts);
  at::Tensor run(const at::Tensor& rows, const model::ExpertGroups& groups,
                 const model::ExpertCompute& compute) override;
  // Time blocked in the token exchanges (forward and backward) since the last call.
  double take_comm_seconds() { return timer_.take_seconds(); }

 private:
  dist::CommTimer timer_;
  dist::Group& group_;
  int64_t num_experts_;
};

// Checkpoints under EP gather nothing: each rank of the first EP group writes its own experts
// (checkpoint/sharded_save.h).

}  // namespace lmtrain::train
