#include "optim/zero_adamw.h"

#include <cmath>

#include "core/error.h"
#include "core/log.h"
#include "optim/adam_state.h"

namespace lmtrain::optim {

ZeroAdamW::ZeroAdamW(FlatParams& params, AdamWOptions opts, dist::Group& group, int stage,
                     dist::Group* expert_group)
    : params_(params), opts_(opts), group_(group), stage_(stage), expert_group_(expert_group) {
  if (stage < 1 || stage > 3) throw Error("ZeroAdamW: stage must be 1, 2 or 3");
  sharded_numel_ = expert_group ? params.expert_begin() : params.numel();
  const int64_t n = sharded_numel_, w = group.size();
  if (n % w != 0) {
    throw Error(
        log::format("ZeroAdamW: flat buffer of %lld elements does not split over %lld "
                    "ranks (build FlatParams with pad_multiple = 16 * world size)",
                    (long long)n, (long long)w));
  }
  shard_ = n / w;
  begin_ = shard_ * group.rank();
  exp_avg_ = torch::zeros({shard_}, params.options());
  exp_avg_sq_ = torch::zeros({shard_}, params.options());
  if (expert_group) {
    expert_avg_ = torch::zeros_like(params.expert_params());
    expert_avg_sq_ = torch::zeros_like(expert_avg_);
  }
}

at::Tensor ZeroAdamW::grad_norm() {
  auto own = params_.grad_slice(begin_, shard_);
  if (expert_group_) return expert_grad_norm(params_, own, *expert_group_, &group_);
  auto sq = own.pow(2).sum().to(torch::kFloat64).reshape({1});
  group_.allreduce(sq, dist::ReduceOp::kSum)->wait();
  return sq.sqrt().reshape({});
}

void ZeroAdamW::scale_grads(const at::Tensor& coef) {
  torch::NoGradGuard no_grad;
  params_.grad_slice(begin_, shard_).mul_(coef);
  if (expert_group_) params_.expert_grads().mul_(coef);
}

void ZeroAdamW::update(double lr, const at::Tensor& found_inf) {
  torch::NoGradGuard no_grad;
  ++step_;
  // Stage 3 holds only this rank's shard of the buffers (FlatParams::keep_shard), and under
  // expert parallelism the expert region, kept whole: every access below stays inside those.
  auto p = params_.param_slice(begin_, shard_);
  auto g = params_.grad_slice(begin_, shard_);
  const int64_t expert_begin = params_.expert_begin();
  // On a GPU the step's scalars live on the device (a CUDA graph can replay the update); an
  // update that the device may skip takes that path on any device.
  if (found_inf.defined()) scalars_.use_on_cpu();
  const DeviceStepScalars* dev = scalars_.begin_on_device(p, lr, step_);
  // Weight decay on the part of each decayed range that this rank updates: its shard and,
  // under expert parallelism, its experts.
  const auto& decayed = params_.decay_ranges();
  adamw_update(p, g, exp_avg_, exp_avg_sq_, ranges_within(decayed, begin_, shard_), step_, lr,
               opts_, dev, found_inf);
  if (expert_group_) {
    auto ep = params_.expert_params();
    adamw_update(ep, params_.expert_grads(), expert_avg_, expert_avg_sq_,
                 ranges_within(decayed, expert_begin, ep.numel()), step_, lr, opts_, dev,
                 found_inf);
  }
  if (found_inf.defined()) scalars_.skip_if(found_inf);
  // Stage 3 gathers parameters where they are needed (parallel/fully_shard.h), not here.
  if (group_.size() > 1 && stage_ < 3) {
    auto flat = params_.params();
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
  nlohmann::json layout = {{"kind", "flat_shards"},
                           {"world_size", group_.size()},
                           {"shard_numel", shard_},
                           {"flat_layout", params_.layout_signature(expert_group_ != nullptr)}};
  // The shards cover the shared region only; the expert state is stored by name.
  if (expert_group_) layout["experts"] = "named";
  return layout;
}

NamedTensors ZeroAdamW::expert_state() const {
  if (!expert_group_) return {};
  return named_expert_state(params_, expert_avg_, expert_avg_sq_, params_.expert_begin());
}

void ZeroAdamW::load_state(const std::vector<NamedTensors>& rank_files,
                           const nlohmann::json& layout, int64_t step) {
  load_saved_state(SavedTensorsInMemory(rank_files), layout, step);
}

void ZeroAdamW::load_saved_state(const SavedTensors& saved, const nlohmann::json& layout,
                                 int64_t step) {
  // This rank's [begin, begin + shard) of the new layout, whatever world size saved it, and
  // under expert parallelism its expert region: straight into the moment buffers.
  read_adam_range(params_, saved, layout, begin_, exp_avg_, exp_avg_sq_);
  if (expert_group_) {
    read_adam_range(params_, saved, layout, params_.expert_begin(), expert_avg_, expert_avg_sq_);
  }
  restart_count(step);
}

std::vector<at::Tensor> ZeroAdamW::replicated_state() const {
  if (group_.size() > 1) return {};
  return {exp_avg_, exp_avg_sq_};
}

int64_t ZeroAdamW::state_bytes() const {
  const int64_t experts = expert_group_ ? 2 * expert_avg_.numel() : 0;
  return (exp_avg_.numel() + exp_avg_sq_.numel() + experts) * exp_avg_.element_size();
}

}  // namespace lmtrain::optim
