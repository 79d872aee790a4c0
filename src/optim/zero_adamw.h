// ZeRO-1 / ZeRO-2 AdamW (Rajbhandari et al., "ZeRO"): the flat parameter buffer (padded to a
// multiple of 16 * world size, so any model shape splits at any world size, 3 ranks included)
// is cut into one equal shard per rank. Each rank keeps Adam moments only for its shard and
// updates only those parameters; the updated shards are then all-gathered into every rank's
// full parameter buffer.
//   stage 1: gradients are all-reduced (dist::GradSync), each rank reads its slice;
//   stage 2: gradients are reduce-scattered bucket by bucket during backward, so each rank
//            receives only its slice, averaged (grad_reduction() = kReduceScatter).
//   stage 3: stage 2's update on parameters that are sharded too: the flat buffers hold only
//            this rank's shard (FlatParams::keep_shard), parallel/fully_shard.h gathers each
//            unit's parameters where forward and backward need them and reduce-scatters their
//            gradients into the shard, so the update skips the final all-gather.
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
  GradReduction grad_reduction() const override {
    return stage_ == 2 ? GradReduction::kReduceScatter : GradReduction::kAllReduce;
  }
  int64_t shard_begin() const override { return begin_; }
  int64_t shard_end() const override { return begin_ + shard_; }
  at::Tensor grad_norm() override;
  void scale_grads(const at::Tensor& coef) override;

  NamedTensors state_tensors() const override;
  nlohmann::json state_layout() const override;
  void load_state(const std::vector<NamedTensors>& rank_files, const nlohmann::json& layout,
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
