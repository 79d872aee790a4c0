// TrainStepper's micro-batches of one step (train/train_step.h): each forward under autocast,
// its loss weighted by its share of the step's valid tokens, and the backward that sums the
// gradients: on one thread into the flat gradient buffer (accumulate_single), or with the
// micro-batch's rows split over the step's workers, each into its own buffer, summed in worker
// order (accumulate_split).
#include <torch/csrc/autograd/autograd.h>

#include "core/error.h"
#include "core/seed_mix.h"
#include "model/dropout.h"
#include "train/train_step.h"

namespace lmtrain::train {

ObjectiveOutput TrainStepper::forward_objective(const Batch& batch) {
  core::AutocastScope autocast(rt_);  // forward only; backward follows the recorded dtypes
  return objective_->compute(model_, batch);
}

at::Tensor TrainStepper::weighted_loss(const ObjectiveOutput& out, int64_t valid_tokens,
                                       double global_valid, int64_t accum_steps) const {
  // The gradient sync averages over the world, so a batch's token share is scaled by its size.
  const double weight = static_cast<double>(valid_tokens) * group_.size() / global_valid;
  auto total = out.loss * weight;
  if (out.batch_term.defined()) total = total + out.batch_term / static_cast<double>(accum_steps);
  return total;
}

double TrainStepper::global_valid_tokens(const std::vector<Batch>& batches) const {
  int64_t local = 0;
  for (const auto& b : batches) local += b.valid_tokens;
  if (!masked_targets_) {
    for (const auto& b : batches) {
      if (b.masked) {
        throw Error("a batch masks targets but the step was not told (set_masked_targets)");
      }
    }
    return static_cast<double>(local) * group_.size();
  }
  // A CPU tensor: exchanged between the hosts (an NCCL group's Gloo companion), so reading it
  // does not wait for the GPU.
  auto count = torch::tensor({local}, torch::kLong);
  group_.allreduce(count, dist::ReduceOp::kSum)->wait();
  return static_cast<double>(count.item<int64_t>());
}

at::Tensor TrainStepper::accumulate_single(const std::vector<Batch>& batches, double global_valid,
                                           MoeStepStats& moe) {
  const auto accum_steps = static_cast<int64_t>(batches.size());
  flat_.zero_grad();
  at::Tensor sums;  // float64 (1 + M,) on the device: no host sync per micro-step
  for (int64_t m = 0; m < accum_steps; ++m) {
    const Batch& batch = batches[m];
    model::ScopedDropoutSeed dropout_seed(
        core::mix_seed(seed_, static_cast<uint64_t>(opt_.steps_started()), m, 0), dropout_split_);
    // ZeRO-3: the root unit gathered, block 0's gather issued; reduced on the last only.
    if (fsdp_) fsdp_->begin_micro_step(m == accum_steps - 1);
    auto out = forward_objective(batch);
    moe.add(out.moe_stats, 1.0 / static_cast<double>(accum_steps));
    if (m == accum_steps - 1) {  // communicate during the last backward only
      if (sync_) sync_->arm();
      if (expert_sync_) expert_sync_->arm();  // also under ZeRO-3, which has no sync_
    }
    // Each backward() sums into the grads: the weights make the sum the global token mean.
    scaler_.scale_loss(weighted_loss(out, batch.valid_tokens, global_valid, accum_steps))
        .backward();
    std::vector<at::Tensor> parts{out.loss.detach().reshape({1})};
    for (const auto& v : out.metrics) parts.push_back(v.detach().reshape({1}));
    auto s = torch::cat(parts).to(torch::kFloat64) * static_cast<double>(batch.valid_tokens);
    sums = sums.defined() ? sums + s : s;
  }
  return sums;
}

at::Tensor TrainStepper::accumulate_split(const std::vector<Batch>& batches, double global_valid,
                                          MoeStepStats& moe) {
  const auto accum_steps = static_cast<int64_t>(batches.size());
  const int k = workers_.count();
  const size_t n_values = 1 + objective_->metric_names().size();
  std::vector<std::vector<double>> sums(k, std::vector<double>(n_values, 0.0));
  std::vector<MoeStepStats> worker_moe(k);
  // Worker 0 writes the flat gradient buffer itself, worker w > 0 its own buffer; the first
  // micro-step copies (no zero fill), later ones add. One add per extra worker at the end.
  auto target = [&](int w) { return w == 0 ? flat_.grads() : worker_grads_[w - 1]; };
  std::vector<char> written(k, 0);  // not vector<bool>: workers write their flags concurrently
  for (int64_t m = 0; m < accum_steps; ++m) {
    const Batch& batch = batches[m];
    const int64_t B = batch.rows();
    workers_.run([&](int w) {
      const int64_t lo = B * w / k, hi = B * (w + 1) / k;
      if (hi == lo) return;
      model::ScopedDropoutSeed dropout_seed(
          core::mix_seed(seed_, static_cast<uint64_t>(opt_.steps_started()), m, w), dropout_split_);
      // Each slice carries its own share of the valid tokens; the per-batch terms (MoE) are
      // weighted by the slice's share of the rows, so the slices sum to the micro-batch's.
      const Batch slice = batch.rows(lo, hi - lo);
      auto out = forward_objective(slice);
      const double row_share = static_cast<double>(hi - lo) / B;
      worker_moe[w].add(out.moe_stats, row_share / accum_steps);
      if (out.batch_term.defined()) out.batch_term = out.batch_term * row_share;
      auto loss = weighted_loss(out, slice.valid_tokens, global_valid, accum_steps);
      auto grads = torch::autograd::grad({scaler_.scale_loss(loss)}, params_);
      const auto& segs = flat_.segments();
      torch::NoGradGuard no_grad;
      const at::Tensor buf = target(w);
      for (size_t i = 0; i < segs.size(); ++i) {
        auto view = flat_.view(buf, segs[i]);
        if (written[w]) {
          view.add_(grads[i]);
        } else {
          view.copy_(grads[i]);
        }
      }
      written[w] = 1;
      const auto valid = static_cast<double>(slice.valid_tokens);
      sums[w][0] += out.loss.item<double>() * valid;
      for (size_t i = 0; i + 1 < n_values; ++i)
        sums[w][i + 1] += out.metrics[i].item<double>() * valid;
    });
  }
  torch::NoGradGuard no_grad;
  // Only a batch with fewer rows than workers leaves a worker without work (and a stale buffer).
  if (!written[0]) flat_.grads().zero_();
  std::vector<double> total = sums[0];
  for (int w = 0; w < k; ++w) moe.add(worker_moe[w]);  // in worker order: deterministic
  for (int w = 1; w < k; ++w) {
    if (written[w]) flat_.grads().add_(worker_grads_[w - 1]);
    for (size_t i = 0; i < n_values; ++i) total[i] += sums[w][i];
  }
  return torch::tensor(total, torch::kFloat64);
}

}  // namespace lmtrain::train
