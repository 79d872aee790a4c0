#include "parallel/expert_parallel.h"

#include <ATen/ATen.h>

#include <chrono>
#include <numeric>

#include "core/error.h"
#include "core/log.h"
#include "distributed/all_to_all_autograd.h"
#include "model/gpt.h"

namespace lmtrain::train {

ExpertParallel make_expert_parallel(dist::Group& world, int64_t ep, int64_t num_experts) {
  ExpertParallel x;
  x.placement = {0, num_experts};
  if (ep == 1) return x;
  const int W = world.size();
  if (num_experts == 0) {
    throw UsageError(
        log::format("config key 'dist.ep' = %lld needs an MoE model (model.moe.num_experts > 0)",
                    (long long)ep));
  }
  if (W % ep != 0) {
    throw UsageError(log::format(
        "config key 'dist.ep' = %lld must divide the world size %d (groups of ep ranks split the "
        "experts)",
        (long long)ep, W));
  }
  if (num_experts % ep != 0) {
    throw UsageError(log::format(
        "config key 'model.moe.num_experts' = %lld is not divisible by 'dist.ep' = %lld (each "
        "EP rank holds the same number of experts)",
        (long long)num_experts, (long long)ep));
  }
  x.ep = static_cast<int>(ep);
  x.ep_rank = world.rank() % x.ep;
  const int64_t local = num_experts / ep;
  x.placement = {x.ep_rank * local, local};
  for (int g = 0; g < W / x.ep; ++g) {
    std::vector<int> ranks(x.ep);
    std::iota(ranks.begin(), ranks.end(), g * x.ep);
    if (auto sub = world.split(ranks)) x.ep_group = std::move(sub);
  }
  for (int i = 0; i < x.ep; ++i) {
    std::vector<int> ranks;
    for (int r = i; r < W; r += x.ep) ranks.push_back(r);
    if (auto sub = world.split(ranks)) x.replica_group = std::move(sub);
  }
  return x;
}

AllToAllExpertDispatcher::AllToAllExpertDispatcher(dist::Group& ep_group, int64_t num_experts)
    : group_(ep_group), num_experts_(num_experts) {}

at::Tensor AllToAllExpertDispatcher::run(const at::Tensor& rows, const model::ExpertGroups& groups,
                                         const model::ExpertCompute& compute) {
  const std::vector<int64_t>& counts = groups.host();  // the exchange's splits
  const int P = group_.size();
  const int64_t local = num_experts_ / P;
  // What each EP rank holds of ours: counts[d * local, (d + 1) * local) -> rank d.
  // On the rows' device (NCCL exchanges device tensors); read back on the host for the splits.
  auto send_counts = at::tensor(counts, at::kLong).to(rows.device());  // (E), destination-major
  auto recv_counts = at::empty_like(send_counts);  // (P * local): [source][local expert]
  const auto start = std::chrono::steady_clock::now();
  group_.all_to_all(recv_counts, send_counts)->wait();
  timer_.add_since(start);
  const auto recv_host = recv_counts.cpu();
  const int64_t* rc = recv_host.data_ptr<int64_t>();
  // offset[s * local + e]: where source s's rows for local expert e start in the received rows.
  std::vector<int64_t> send_splits(P, 0), recv_splits(P, 0), local_counts(local, 0);
  std::vector<int64_t> offset(static_cast<size_t>(P * local));
  int64_t received_rows = 0;
  for (int d = 0; d < P; ++d) {
    for (int64_t e = 0; e < local; ++e) {
      offset[d * local + e] = received_rows;
      received_rows += rc[d * local + e];
      send_splits[d] += counts[d * local + e];
      recv_splits[d] += rc[d * local + e];
      local_counts[e] += rc[d * local + e];
    }
  }
  auto received = dist::all_to_all_autograd(group_, rows, recv_splits, send_splits, &timer_);
  // Received rows are grouped [source][local expert]; the experts want [local expert][source].
  std::vector<int64_t> order;
  order.reserve(static_cast<size_t>(received_rows));
  for (int64_t e = 0; e < local; ++e) {
    for (int s = 0; s < P; ++s) {
      for (int64_t i = 0; i < rc[s * local + e]; ++i) order.push_back(offset[s * local + e] + i);
    }
  }
  auto index = at::tensor(order, at::kLong).to(rows.device());
  auto by_expert = received.index_select(0, index);
  auto out = compute(by_expert, model::ExpertGroups(local_counts));  // (R, C)
  auto by_source = at::empty_like(out).index_copy(0, index, out);    // back to [source][expert]
  return dist::all_to_all_autograd(group_, by_source, send_splits, recv_splits, &timer_);
}

}  // namespace lmtrain::train
