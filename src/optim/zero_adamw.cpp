#include "optim/zero_adamw.h"

#include <cmath>

#include "core/error.h"
#include "core/log.h"
#include "optim/adam_state.h"

namespace lmtrain::optim {

ZeroAdamW::ZeroAdamW(FlatParams& params, AdamWOptions opts, dist::Group& group, int stage)
    : params_(params), opts_(opts), group_(group), stage_(stage) {
  if (stage != 1 && stage != 2) throw Error("ZeroAdamW: stage must be 1 or 2");
  const int64_t n = params.numel(), w = group.size();
  if (n % w != 0) {
    throw Error(
        log::format("ZeroAdamW: flat buffer of %lld elements does not split over %lld "
                    "ranks (build FlatParams with pad_multiple = 16 * world size)",
                    (long long)n, (long long)w));
  }
  shard_ = n / w;
  begin_ = shard_ * group.rank();
  exp_avg_ = torch::zeros({shard_}, params.params().options());
  exp_avg_sq_ = torch::zeros({shard_}, params.params().options());
}

at::Tensor ZeroAdamW::grad_norm() {
  auto sq = params_.grads().narrow(0, begin_, shard_).pow(2).sum().to(torch::kFloat64).reshape({1});
  group_.allreduce(sq, dist::ReduceOp::kSum)->wait();
  return sq.sqrt().reshape({});
}

void ZeroAdamW::scale_grads(const at::Tensor& coef) {
  torch::NoGradGuard no_grad;
  params_.grads().narrow(0, begin_, shard_).mul_(coef);
}

void ZeroAdamW::step(double lr) {
  torch::NoGradGuard no_grad;
  ++step_;
  auto flat = params_.params();
  auto p = flat.narrow(0, begin_, shard_);
  auto g = params_.grads().narrow(0, begin_, shard_);
  if (opts_.weight_decay != 0) {
    // Weight decay on the part of each decayed range that falls in this shard.
    for (const auto& [b, e] : params_.decay_ranges()) {
      const int64_t lo = std::max(b, begin_), hi = std::min(e, begin_ + shard_);
      if (lo < hi) flat.narrow(0, lo, hi - lo).mul_(1.0 - lr * opts_.weight_decay);
    }
  }
  adam_update(p, g, exp_avg_, exp_avg_sq_, step_, lr, opts_);
  if (group_.size() > 1) {
    // All-gather of the updated shards, as one in-place broadcast per shard: c10d's Gloo
    // allgather stages the whole buffer in a temporary (a full parameter copy per step), which
    // would cost more memory than the sharded state saves. Same traffic, no staging copy.
    std::vector<std::shared_ptr<dist::Work>> works;
    for (int r = 0; r < group_.size(); ++r) {
      auto shard = flat.narrow(0, r * shard_, shard_);
      works.push_back(group_.broadcast(shard, r));
    }
    for (auto& w : works) w->wait();
  }
}

NamedTensors ZeroAdamW::state_tensors() const {
  return {{"exp_avg", exp_avg_}, {"exp_avg_sq", exp_avg_sq_}};
}

nlohmann::json ZeroAdamW::state_layout() const {
  return {{"kind", "flat_shards"},
          {"world_size", group_.size()},
          {"shard_numel", shard_},
          {"flat_layout", params_.layout_signature()}};
}

void ZeroAdamW::load_state(const std::vector<NamedTensors>& rank_files,
                           const nlohmann::json& layout, int64_t step) {
  auto [m, v] = assemble_adam_state(params_, rank_files, layout);
  torch::NoGradGuard no_grad;
  exp_avg_.copy_(m.narrow(0, begin_, shard_));
  exp_avg_sq_.copy_(v.narrow(0, begin_, shard_));
  step_ = step;
}

std::vector<at::Tensor> ZeroAdamW::replicated_state() const {
  if (group_.size() > 1) return {};
  return {exp_avg_, exp_avg_sq_};
}

int64_t ZeroAdamW::state_bytes() const {
  return (exp_avg_.numel() + exp_avg_sq_.numel()) * exp_avg_.element_size();
}

}  // namespace lmtrain::optim
