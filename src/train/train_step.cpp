#include "train/train_step.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "model/dropout.h"
#include "parallel/tp_split_matrices.h"

namespace lmtrain::train {

void TrainStepper::finish_expert_grads() {
  torch::NoGradGuard no_grad;
  flat_.expert_grads().div_(static_cast<double>(ep_->ep));
}

int resolve_workers(int64_t configured, int threads, int64_t micro_batch) {
  if (configured > 0) return static_cast<int>(configured);
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, micro_batch)));
}

TrainStepper::TrainStepper(model::GptImpl& model, optim::FlatParams& flat, optim::Optimizer& opt,
                           dist::Group& group, const core::Runtime& rt, int workers, uint64_t seed,
                           int64_t bucket_bytes, LossScaler scaler, const ExpertParallel* ep,
                           parallel::FullyShard* fsdp)
    : model_(model),
      flat_(flat),
      opt_(opt),
      group_(group),
      rt_(rt),
      scaler_(scaler),
      // Split-batch workers are a CPU feature; under EP the ranks' all-to-alls must come in one
      // order, so one worker.
      workers_(rt.cuda() || (ep && ep->active()) || fsdp ? 1 : workers),
      seed_(seed),
      fsdp_(fsdp),
      objective_(std::make_shared<LmObjective>()) {
  // fp16 on CUDA: the skip is decided on the device (nothing read on the host; capturable).
  if (scaler_.enabled() && rt.cuda() && !scaler_.on_device() && opt.skips_on_device()) {
    scaler_.keep_on_device(rt.device);
  }
  if (scaler_.on_device() && !opt.skips_on_device()) {
    throw Error("internal: optimizer " + opt.name() + " cannot skip an fp16 step on the device");
  }
  const bool split_experts = ep && ep->active();
  if (split_experts) {
    ep_ = ep;
    if (!opt.expert_parallel()) {
      throw Error(
          "internal: under expert parallelism the optimizer must be given the EP group "
          "(optim::make_optimizer's expert_group)");
    }
    if (opt.grad_reduction() == optim::GradReduction::kToOwners) {
      throw UsageError(
          "dist.ep > 1 works with AdamW, replicated or sharded (optim.name=adamw, dist.zero "
          "0/1/2/3)");
    }
  }
  std::vector<std::pair<int64_t, int64_t>> ranges, expert_ranges;
  std::vector<torch::Tensor> expert_params;
  // The flat buffers' parameters: the model's and any an objective trains beside it.
  for (size_t i = 0; i < flat.segments().size(); ++i) {
    const auto& seg = flat.segments()[i];
    if (split_experts && seg.expert) {
      expert_params.push_back(flat.tensors()[i]);
      expert_ranges.emplace_back(seg.offset - flat.expert_begin(), seg.numel);
    } else {
      params_.push_back(flat.tensors()[i]);
      ranges.emplace_back(seg.offset, seg.numel);
    }
  }
  std::vector<int> owners;
  if (opt.grad_reduction() == optim::GradReduction::kToOwners) {
    for (const auto& seg : flat.segments()) owners.push_back(opt.grad_owner(seg.name));
  }
  // Expert parallelism: the non-expert region [0, expert_begin) over the world, the expert
  // region over the ranks that hold the same experts.
  if (!fsdp_) {
    auto grads = split_experts ? flat.shared_region(flat.grads()) : flat.grads();
    sync_ = std::make_unique<dist::GradSync>(
        group, params_, ranges, grads, bucket_bytes,
        opt.grad_reduction() == optim::GradReduction::kReduceScatter, std::move(owners),
        rt.reduce_dtype);
  }
  if (split_experts) {
    expert_sync_ = std::make_unique<dist::GradSync>(
        *ep->replica_group, expert_params, expert_ranges, flat.expert_grads(), bucket_bytes, false,
        std::vector<int>{}, rt.reduce_dtype);
    params_.insert(params_.end(), expert_params.begin(), expert_params.end());
  }
  if (workers_.count() > 1) {
    for (int w = 1; w < workers_.count(); ++w) {
      worker_grads_.push_back(torch::zeros_like(flat.grads()));
    }
  }
  install_deferred_table_grad();
}

TrainStepper::~TrainStepper() { model_.transformer->wte->set_lookup_grad_sink(nullptr); }

void TrainStepper::install_deferred_table_grad() {
  // One worker: split-batch workers take gradients with autograd::grad into buffers of their
  // own, which the late rows would bypass. All-reduce mode: the rows are added to the average.
  if (!sync_ || !sync_->active() || workers_.count() != 1 || !model_.config().tie_embeddings ||
      opt_.grad_reduction() != optim::GradReduction::kAllReduce) {
    return;
  }
  const auto& table = model_.transformer->wte->weight;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].is_same(table)) continue;
    table_grad_ =
        std::make_unique<DeferredTableGrad>(*sync_, i, table.size(0), table.size(1), group_.size());
    model_.transformer->wte->set_lookup_grad_sink(table_grad_.get());
    return;
  }
  // Not found: a frozen table (LoRA) is not among the trained parameters.
}

void TrainStepper::rebind_grad_hooks_to_current_stream() {
  // A captured step reads nothing on the host: the late rows' count exchange would.
  if (table_grad_) {
    model_.transformer->wte->set_lookup_grad_sink(nullptr);
    sync_->stop_late_rows();
    table_grad_.reset();
  }
  if (sync_) sync_->rebind_to_current_stream();
  if (expert_sync_) expert_sync_->rebind_to_current_stream();
}

std::vector<double> StepResult::metric_values() const {
  if (!metrics.defined()) return {};
  const auto host = metrics.to(torch::kCPU).contiguous();
  const double* p = host.data_ptr<double>();
  return {p, p + host.numel()};
}

StepResult TrainStepper::step(int64_t accum_steps, const MicroBatchFn& next_batch, double lr,
                              double grad_clip) {
  return step(
      accum_steps,
      [&](int64_t m) {
        auto [x, y] = next_batch(m);
        return Batch::lm(std::move(x), std::move(y));
      },
      lr, grad_clip);
}

StepResult TrainStepper::step(int64_t accum_steps, const BatchFn& next_batch, double lr,
                              double grad_clip) {
  // All micro-batches first: their valid tokens normalise every micro-batch's loss.
  std::vector<Batch> batches;
  for (int64_t m = 0; m < accum_steps; ++m) batches.push_back(next_batch(m));
  const double global_valid = std::max(1.0, global_valid_tokens(batches));
  MoeStepStats moe;
  auto sums = workers_.count() > 1 ? accumulate_split(batches, global_valid, moe)
                                   : accumulate_single(batches, global_valid, moe);
  StepResult r;
  // Average across ranks (a no-op in a world of one).
  r.comm_wait_s = fsdp_ ? fsdp_->finish() : sync_->finish();
  if (expert_sync_) {
    r.comm_wait_s += expert_sync_->finish();
    finish_expert_grads();
  }
  // Loss and metrics: sums over valid tokens, all-reduced in one exchange, then token means.
  sums = sums.to(rt_.device);
  group_.allreduce(sums, dist::ReduceOp::kSum)->wait();
  sums = sums / global_valid;
  r.loss = sums[0];
  r.metrics = sums.narrow(0, 1, sums.numel() - 1);
  // Global expert loads; the balancing bias moves before any skip (it depends on routing only).
  moe.finish(group_, model_, model_.config().moe.bias_update_rate);
  r.moe = moe.packed();

  update(r, lr, grad_clip);
  return r;
}

void TrainStepper::use_tensor_parallel(const parallel::TensorParallel& tp, dist::Group& tp_group,
                                       dist::Group& shard_group) {
  dropout_split_ = tp.dropout_split();
  tp_group_ = &tp_group;
  if (opt_.take_split_matrices(
          parallel::make_tp_split_matrices(model_.config(), tp.slices(), tp_group))) {
    return;
  }
  dist::Group* sharded_over = opt_.sharded() ? &shard_group : nullptr;
  grad_norm_ = [&tp, this, sharded_over] {
    return tp.grad_norm(flat_, opt_.shard_begin(), opt_.shard_end(), sharded_over);
  };
}

void TrainStepper::clip(const at::Tensor& grad_norm, double grad_clip) {
  if (grad_clip <= 0) return;
  // Same rule as torch.nn.utils.clip_grad_norm_.
  if (grad_norm.is_cpu()) {
    const double coef = grad_clip / (grad_norm.item<double>() + 1e-6);
    if (coef < 1.0) opt_.scale_grads(torch::scalar_tensor(coef, torch::kFloat64));
  } else {  // on the device, without waiting for the norm: coef = min(1, clip / norm)
    opt_.scale_grads((grad_clip / (grad_norm + 1e-6)).clamp_max(1.0));
  }
}

void TrainStepper::update(StepResult& r, double lr, double grad_clip) {
  torch::NoGradGuard no_grad;
  // What this rank updates, every rank checking its own for inf/nan (the flag is agreed over
  // the world): the whole buffer, or ZeRO-3's gradient shard plus, under expert parallelism,
  // this rank's experts, which ZeRO-3 keeps whole outside the shard (parallel/moe_shard.h).
  std::vector<at::Tensor> grads;
  if (flat_.shard_only()) {
    grads.push_back(flat_.grad_slice(opt_.shard_begin(), opt_.shard_end() - opt_.shard_begin()));
    if (ep_) grads.push_back(flat_.expert_grads());
  } else {
    grads.push_back(flat_.grads());
  }
  if (scaler_.on_device()) {
    // fp16, decided on the device: every step runs the same kernels, an overflowing one with
    // found_inf = 1, which leaves the update out (parameters, moments and the device step
    // count unchanged) and halves the scale. Clipping may scale inf/nan gradients: unused.
    const at::Tensor& found_inf = scaler_.unscale_and_check_on_device(grads, group_);
    if (tp_group_) {
      // Agreed over the data-parallel group; the TP ranks checked other slices: MAX over them
      // too, in place (the scaler reads the same tensor).
      at::Tensor flag = found_inf;
      tp_group_->allreduce(flag, dist::ReduceOp::kMax)->wait();
    }
    const auto norm = grad_norm();  // global, also when sharded or expert-parallel
    clip(norm, grad_clip);
    opt_.step_unless(lr, found_inf);
    scaler_.update_on_device();
    r.grad_norm = norm.masked_fill(found_inf > 0, INFINITY);  // as the host form reports it
    r.skipped = found_inf.clone();                            // the flag is rewritten next step
    return;
  }
  bool found_inf = scaler_.unscale_and_check(grads, group_);
  if (tp_group_ && scaler_.enabled()) {
    // As above: the TP ranks checked other slices.
    auto flag = torch::full({1}, found_inf ? 1.0f : 0.0f, torch::kFloat);
    tp_group_->allreduce(flag, dist::ReduceOp::kMax)->wait();
    found_inf = flag.item<float>() > 0;
  }
  if (scaler_.enabled()) r.skipped = torch::full({}, found_inf ? 1.0 : 0.0, torch::kFloat);
  if (found_inf) {
    // fp16 overflow on some rank: no update; the next step retries at half the scale.
    scaler_.update(true);
    r.grad_norm = torch::full({}, INFINITY, r.loss.options());
    return;
  }
  scaler_.update(false);
  r.grad_norm = grad_norm();  // global, also when sharded or expert-parallel
  clip(r.grad_norm, grad_clip);
  opt_.step(lr);
}

}  // namespace lmtrain::train
