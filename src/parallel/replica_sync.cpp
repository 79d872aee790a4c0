#include "parallel/replica_sync.h"

#include "core/crc32c.h"
#include "core/error.h"
#include "core/log.h"

namespace lmtrain::train {

void sync_replicas(dist::Group& group, const optim::FlatParams& flat, const optim::Optimizer& opt,
                   const TrainingState& state, dist::Group* expert_replicas) {
  if (group.size() == 1) return;
  torch::NoGradGuard no_grad;
  // Broadcast a flat-layout tensor: the shared region over the world, the expert region (EP)
  // over the ranks holding the same experts.
  auto broadcast = [&](at::Tensor t) {
    if (!expert_replicas || t.numel() != flat.numel()) {
      group.broadcast(t, 0)->wait();
      return;
    }
    auto shared = flat.shared_region(t);
    group.broadcast(shared, 0)->wait();
    auto experts = flat.expert_region(t);
    expert_replicas->broadcast(experts, 0)->wait();
  };
  // ZeRO-3's sharded set-up (parallel/sharded_init.h): no rank has the whole parameters to
  // broadcast or fingerprint; each wrote its shard from the same seed or the same file. The
  // layout size and the training position are still compared.
  const bool sharded = flat.shard_only();
  auto params = sharded ? at::Tensor() : flat.params();
  if (!sharded) broadcast(params);
  for (auto t : opt.replicated_state()) broadcast(t);

  // The fingerprint leaves out the expert region under EP (it differs between EP ranks).
  uint32_t crc = 0;
  if (!sharded) {
    const auto fingerprinted = expert_replicas ? flat.shared_region(params) : params;
    const auto host = fingerprinted.to(torch::kCPU);  // may live on a GPU
    crc = core::crc32c(host.data_ptr(), host.numel() * host.element_size());
  }
  // (fingerprint, numel, step, optimizer step, epoch, cursor)
  auto mine = torch::tensor({static_cast<int64_t>(crc), flat.numel(), state.step, opt.step_count(),
                             state.position.epoch, state.position.cursor},
                            torch::kInt64);
  std::vector<at::Tensor> all;
  for (int r = 0; r < group.size(); ++r) all.push_back(torch::empty_like(mine));
  group.allgather(all, mine)->wait();
  const auto ref = all[0];
  for (int r = 1; r < group.size(); ++r) {
    const auto v = all[r];
    if (v[1].item<int64_t>() != ref[1].item<int64_t>()) {
      throw Error(
          log::format("rank %d built a model with %lld parameter elements, rank 0 with "
                      "%lld: every rank needs the same config",
                      r, (long long)v[1].item<int64_t>(), (long long)ref[1].item<int64_t>()));
    }
    if (!v.slice(0, 2).equal(ref.slice(0, 2))) {
      throw Error(log::format(
          "rank %d is at step %lld (optimizer step %lld, epoch %lld, cursor %lld) but rank 0 at "
          "step %lld (optimizer step %lld, epoch %lld, cursor %lld): the ranks resumed from "
          "different checkpoints; run.dir must be one directory shared by all ranks",
          r, (long long)v[2].item<int64_t>(), (long long)v[3].item<int64_t>(),
          (long long)v[4].item<int64_t>(), (long long)v[5].item<int64_t>(),
          (long long)ref[2].item<int64_t>(), (long long)ref[3].item<int64_t>(),
          (long long)ref[4].item<int64_t>(), (long long)ref[5].item<int64_t>()));
    }
    if (v[0].item<int64_t>() != ref[0].item<int64_t>()) {
      throw Error(log::format(
          "rank %d's parameters differ from rank 0's after the broadcast "
          "(CRC %08llx vs %08llx)",
          r, (unsigned long long)v[0].item<int64_t>(), (unsigned long long)ref[0].item<int64_t>()));
    }
  }
  if (sharded) {
    log::info(log::format(
        "replicas agree: %d ranks at the same position; each wrote its own parameter shard "
        "(ZeRO-3's sharded set-up: nothing whole to broadcast)",
        group.size()));
    return;
  }
  log::info(
      log::format("replicas agree: parameters and optimizer state broadcast from rank 0, "
                  "CRC %08x on all %d ranks",
                  crc, group.size()));
}

}  // namespace lmtrain::train
