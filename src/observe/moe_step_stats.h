// MoE statistics of one optimizer step, gathered over micro-batches, split workers and ranks,
// and DeepSeek-V3's auxiliary-loss-free balancing: after each step every rank moves each
// expert's selection bias by bias_update_rate toward the global mean load (up for underloaded
// experts, down for overloaded ones). The load is the global one (all tokens of the step on all
// ranks), so every rank applies the same update and N ranks equal 1 rank.
//
// Kept as one (L, E + 3) float64 device tensor: per MoE layer the E expert loads (assignment
// counts before capacity), the dropped count, and the forward-weighted aux and z losses. No host
// read until the trainer logs.
#pragma once
#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "model/moe.h"

namespace lmtrain::dist {
class Group;
}
namespace lmtrain::model {
class GptImpl;
}

namespace lmtrain::train {

struct MoeLayerMetrics {
  int64_t layer = 0;                  // block index
  double load_min = 0, load_max = 0;  // smallest / largest expert share of the assignments
  double load_cv = 0;                 // coefficient of variation of the expert loads
  double dropped = 0;                 // fraction of assignments dropped by capacity
  double aux = 0, z = 0;              // unweighted balancing losses (mean over the step)
};

class MoeStepStats {
 public:
  MoeStepStats() = default;
  // Adds one forward's per-layer statistics; aux and z count with `weight` (the forward's share
  // of the step's loss, so the sum is the step mean).
  void add(const std::vector<model::MoeStats>& stats, double weight);
  void add(const MoeStepStats& other);
  bool empty() const { return !packed_.defined(); }
  // Sums loads and dropped counts over the group's ranks, averages aux and z; then, with
  // bias_rate > 0, updates each MoE layer's expert_bias. A no-op for a dense model.
  void finish(dist::Group& group, model::GptImpl& model, double bias_rate);
  // (L, E + 3) float64 after finish (undefined for a dense model).
  const at::Tensor& packed() const { return packed_; }

 private:
  at::Tensor packed_;
};

// Host summaries of packed() (reads the device); `layers`: the block index of each MoE layer.
std::vector<MoeLayerMetrics> summarize_moe(const at::Tensor& packed,
                                           const std::vector<int64_t>& layers);

}  // namespace lmtrain::train
