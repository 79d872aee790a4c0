// AdamW (decoupled weight decay, Loshchilov & Hutter) over FlatParams, with the exact
// operation order of torch::optim::AdamW so results match it. Weight decay applies only to
// FlatParams::decay_ranges() (matrices; not biases, norms, embeddings).
#pragma once
#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

#include "core/config_schema.h"
#include "distributed/group.h"
#include "optim/device_step_optimizer.h"
#include "optim/device_step_scalars.h"
#include "optim/flat_params.h"
#include "optim/optimizer.h"

namespace lmtrain::optim {

// Each member starts at its key's schema default (core/config_schema.h).
struct AdamWOptions {
  double beta1 = core::default_float("optim.beta1");
  double beta2 = core::default_float("optim.beta2");
  double eps = core::default_float("optim.eps");
  double weight_decay = core::default_float("optim.weight_decay");
};

// The Adam moment update and parameter step (no weight decay) for equally shaped p, g, m, v,
// in torch::optim::AdamW's operation order; `step` counts this update (1 for the first).
// Shared by every AdamW variant so that replicated, sharded and Muon's AdamW group agree.
// With `device_scalars` (after their begin() for this step) lr and step are read from those
// tensors by libtorch's fused kernel, so the update waits for nothing on the host; with them a
// defined `found_inf` (0-dim float32, 1 = skip) makes the kernel leave p, m and v untouched.
void adam_update(at::Tensor p, const at::Tensor& g, at::Tensor m, at::Tensor v, int64_t step,
                 double lr, const AdamWOptions& o,
                 const DeviceStepScalars* device_scalars = nullptr,
                 const at::Tensor& found_inf = {});

// A list of [begin, end) element ranges.
using Ranges = std::vector<std::pair<int64_t, int64_t>>;

// The parts of flat `ranges` inside [lo, lo + n), as offsets from lo (for an update over a
// slice of the flat buffers: a ZeRO shard, the expert region).
Ranges ranges_within(const Ranges& ranges, int64_t lo, int64_t n);

// AdamW's whole update of p: decoupled weight decay (p *= 1 - lr * weight_decay) on the
// `decayed` ranges of p (offsets into p, sorted, disjoint), then adam_update on all of p. On the
// device-scalar path the decay goes into libtorch's fused kernel: the decayed ranges in one call
// with weight_decay, the rest in one with 0, two multi-tensor launches instead of a mul_ per
// range (GPT-2 124M's ~50 ranges took 0.82 ms of an H100 step, trace of 2026-11-28). The kernel
// decays as p - lr * weight_decay * p before its step (torch.optim.AdamW(fused=True)), and a
// skipped update (found_inf = 1) leaves p whole. The host path decays range by range.
void adamw_update(at::Tensor p, const at::Tensor& g, at::Tensor m, at::Tensor v,
                  const Ranges& decayed, int64_t step, double lr, const AdamWOptions& o,
                  const DeviceStepScalars* device_scalars = nullptr,
                  const at::Tensor& found_inf = {});

// Expert parallelism: the global gradient norm with every parameter counted once. shared_grads
// is the shared region's gradient this rank holds (all of it, or its shard when shared_group is
// the group the shards are summed over); the expert region's squares are summed over the EP
// group. A float64 scalar on the gradients' device.
at::Tensor expert_grad_norm(const FlatParams& flat, const at::Tensor& shared_grads,
                            dist::Group& expert_group, dist::Group* shared_group);

// Adam state of the expert segments as named tensors (Optimizer::expert_state): views into flat
// buffers exp_avg / exp_avg_sq that start at flat offset `origin` (0: the whole layout).
NamedTensors named_expert_state(const FlatParams& flat, const at::Tensor& exp_avg,
                                const at::Tensor& exp_avg_sq, int64_t origin);

// Replicated AdamW: every rank holds the whole state and updates every parameter.
class AdamW : public DeviceStepOptimizer {
 public:
  // expert_group: under expert parallelism, the EP group: the expert region of the flat buffers
  // holds this rank's experts (different on each rank of the group), so the gradient norm sums
  // that region's squares over the group.
  AdamW(FlatParams& params, AdamWOptions opts, dist::Group* expert_group = nullptr);

  std::string name() const override { return "adamw"; }
  int64_t shard_begin() const override { return 0; }
  int64_t shard_end() const override { return params_.numel(); }
  at::Tensor grad_norm() override;
  void scale_grads(const at::Tensor& coef) override;
  // The flat moment buffers (exp_avg, exp_avg_sq), laid out like FlatParams::params().
  std::vector<at::Tensor> replicated_state() const override { return {exp_avg_, exp_avg_sq_}; }
  int64_t state_bytes() const override;

  // State as named tensors ("exp_avg.<param name>", "exp_avg_sq.<param name>"): independent of
  // the flat layout, so checkpoints survive layout changes.
  NamedTensors state_tensors() const override;
  nlohmann::json state_layout() const override { return {{"kind", "named"}}; }
  NamedTensors expert_state() const override;
  bool expert_parallel() const override { return expert_group_ != nullptr; }
  void load_state(const std::vector<NamedTensors>& rank_files, const nlohmann::json& layout,
                  int64_t step) override;
  void load_saved_state(const SavedTensors& saved, const nlohmann::json& layout,
                        int64_t step) override;
  // The single-file form (a checkpoint written by a replicated optimizer).
  void load_state(const NamedTensors& tensors, int64_t step) {
    load_state(std::vector<NamedTensors>{tensors}, {{"kind", "named"}}, step);
  }

 private:
  // One update with learning rate `lr` from the gradients in params.grads().
  void update(double lr, const at::Tensor& found_inf) override;
  c10::Device params_device() const override { return params_.params().device(); }

  FlatParams& params_;
  AdamWOptions opts_;
  dist::Group* expert_group_;
  at::Tensor exp_avg_, exp_avg_sq_;  // (numel,) like params
};

}  // namespace lmtrain::optim
