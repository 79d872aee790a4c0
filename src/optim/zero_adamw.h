// ZeRO-1 / ZeRO-2 AdamW (Rajbhandari et al., "ZeRO"): the flat parameter buffer (padded to a
// multiple of 16 * world size, so any model shape splits at any world size, 3 ranks included)
// is cut into one equal shard per rank. Each rank keeps Adam moments only for its shard and
// updates only those parameters; the updated shards are then all-gathered into every rank's
// full parameter buffer.
//   stage 1: optimizer state sharded. Gradients are reduce-scattered bucket by bucket during
//            backward (dist::GradSync, grad_reduction() = kReduceScatter), so each rank
//            receives only its slice averaged: the paper's P_os, whose traffic is DDP's (a
//            reduce-scatter plus the parameter all-gather, 2 x (W-1)/W of the model per step).
//            All-reducing whole gradients instead, as stage 1 did before, sent 1.47x DDP's
//            bytes (the all-reduce, then the all-gather on top) for gradients the update
//            never reads outside its shard.
//   stage 2: gradients sharded too. In the paper stage 2 differs from stage 1 by memory only:
//            a rank frees the gradients outside its shard once their bucket has gone out,
//            where stage 1 keeps them (and so may accumulate micro-steps locally and reduce
//            once). This trainer keeps the whole flat gradient buffer at both stages (backward
//            accumulates into it across micro-steps and the buckets are views of it), so
//            stages 1 and 2 run the same path: same bytes, bit for bit the same results. Each
//            rank's buffer holds its full local gradient, averaged only inside its shard.
//   stage 3: stage 2's update on parameters that are sharded too: the flat buffers hold only
//            this rank's shard (FlatParams::keep_shard), parallel/fully_shard.h gathers each
//            unit's parameters where forward and backward need them and reduce-scatters their
//            gradients into the shard, so the update skips the final all-gather. Under expert
//            parallelism the expert region stays local and whole (keep_shard's keep_experts).
// The per-element update is AdamW's, in the same operation order, so results equal the
// replicated optimizer up to the gradient norm's summation order.
// Under expert parallelism only the shared region [0, expert_begin) is sharded over the world;
// the expert region holds this rank's experts, whose gradients are averaged over their replicas,
// and keeps its whole Adam state on each rank (replicas update it alike). Checkpoints then store
// the shards plus the expert state by name (gathered into whole stacks), so a resume at another
// dist.ep or world size reshards both.
#pragma once
#include "distributed/group.h"
#include "optim/adamw.h"

namespace lmtrain::optim {

class ZeroAdamW : public DeviceStepOptimizer {
 public:
  // `params` must be padded to a multiple of group.size() (FlatParams pad_multiple).
  // expert_group: the EP group under expert parallelism (see above), else null.
  ZeroAdamW(FlatParams& params, AdamWOptions opts, dist::Group& group, int stage,
            dist::Group* expert_group = nullptr);

  std::string name() const override { return "adamw-zero" + std::to_string(stage_); }
  // Stages 1 and 2 reduce-scatter (above). Stage 3 reduces in parallel/fully_shard.h; where
  // it falls back to one rank's path (a shard group of one) its GradSync all-reduces.
  GradReduction grad_reduction() const override {
    return stage_ == 3 ? GradReduction::kAllReduce : GradReduction::kReduceScatter;
  }
  int64_t shard_begin() const override { return begin_; }
  int64_t shard_end() const override { return begin_ + shard_; }
  at::Tensor grad_norm() override;
  void scale_grads(const at::Tensor& coef) override;

  NamedTensors state_tensors() const override;
  nlohmann::json state_layout() const override;
  void load_state(const std::vector<NamedTensors>& rank_files, const nlohmann::json& layout,
                  int64_t step) override;
  // Reads only this rank's shard of the saved moments (and its experts' state).
  void load_saved_state(const SavedTensors& saved, const nlohmann::json& layout,
                        int64_t step) override;
  NamedTensors expert_state() const override;
  bool expert_parallel() const override { return expert_group_ != nullptr; }
  bool sharded() const override { return group_.size() > 1; }
  std::vector<at::Tensor> replicated_state() const override;
  int64_t state_bytes() const override;

 private:
  void update(double lr, const at::Tensor& found_inf) override;
  c10::Device params_device() const override { return params_.options().device(); }

  FlatParams& params_;
  AdamWOptions opts_;
  dist::Group& group_;
  int stage_;
  dist::Group* expert_group_;
  int64_t sharded_numel_ = 0;              // the sharded prefix of the flat buffers
  int64_t shard_ = 0, begin_ = 0;          // this rank's slice of them
  at::Tensor exp_avg_, exp_avg_sq_;        // (shard_,)
  at::Tensor expert_avg_, expert_avg_sq_;  // (numel - expert_begin,) under expert parallelism
};

}  // namespace lmtrain::optim
