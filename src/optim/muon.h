// Muon (Keller Jordan et al., 2024) for the 2-D hidden matrices, AdamW for everything else
// (embeddings, output head, norms, biases), grouped as nanochat does.
//
// Per Muon matrix W with gradient G (rows x cols):
//   momentum  mu_t = start + min(t / warmup, 1) * (end - start)     (nanochat: 0.85 -> 0.95)
//   buffer    B    = mu * B + (1 - mu) * G
//   Nesterov  U    = G + mu * (B - G)              (or U = B without Nesterov)
//   orthogonalise U by 5 quintic Newton-Schulz steps, X0 = U / (||U||_F + 1e-7), with
//   (a, b, c) = (3.4445, -4.7750, 2.0315):  A = X Xᵀ; X = a X + (b A + c A A) X  (on the wide
//   orientation: a tall matrix is transposed first)
//   W -= lr_muon * max(1, rows / cols)^0.5 * X
// The AdamW group is updated exactly as optim::AdamW does it (decay on its matrices only).
//
// Distributed (DistMuon): each Muon matrix is owned by one rank — block-cyclic over the
// matrices sorted by shape — which alone keeps its momentum and runs Newton-Schulz; the updated
// matrices are then broadcast from their owners. dist::GradSync sends each matrix's gradient
// to its owner alone (all-to-all, summed there) and all-reduces the AdamW group's.
//
// Tensor parallelism (dist.tp): each rank holds pieces of the matrices; the momentum is kept per
// piece (its update is elementwise), and the owner's TP ranks gather the Nesterov update whole,
// orthogonalise it and keep their pieces (optim/split_matrices.h), so the update equals one
// process's.
#pragma once
#include <functional>
#include <memory>
#include <utility>

#include "core/config_schema.h"
#include "distributed/group.h"
#include "optim/adamw.h"

namespace lmtrain::optim {

// The keyed members start at their schema defaults (core/config_schema.h).
struct MuonOptions {
  double lr = core::default_float("optim.muon_lr");  // peak lr (scheduled like optim.lr)
  double momentum = core::default_float("optim.muon_momentum");              // after warm-up
  double momentum_start = core::default_float("optim.muon_momentum_start");  // at step 0
  int64_t momentum_warmup = core::default_int("optim.muon_momentum_warmup");
  bool nesterov = true;
  int ns_steps = 5;
  // Peak lrs of the AdamW groups (0 = the base optim.lr): token/position embeddings, the
  // untied output head; norms and biases always use the base lr.
  double embedding_lr = core::default_float("optim.embedding_lr");
  double head_lr = core::default_float("optim.head_lr");

  double momentum_at(int64_t step) const;  // step = updates done before this one
};

// Orthogonalises a 2-D matrix by `steps` quintic Newton-Schulz iterations (fp32).
at::Tensor newton_schulz5(const at::Tensor& g, int steps = 5);

class Muon : public Optimizer {
 public:
  // `is_muon(name, shape)` picks the Muon group. step(lr) gets the scheduled base lr; every
  // group runs the same schedule from its own peak: group_lr * lr / base_lr.
  Muon(FlatParams& params, AdamWOptions adam, MuonOptions muon, double base_lr, dist::Group& group,
       const std::function<bool(const std::string&, const std::vector<int64_t>&)>& is_muon);

  std::string name() const override { return "muon"; }
  int64_t shard_begin() const override { return 0; }
  int64_t shard_end() const override { return params_.numel(); }
  GradReduction grad_reduction() const override {
    return group_.size() > 1 ? GradReduction::kToOwners : GradReduction::kAllReduce;
  }
  int grad_owner(const std::string& name) const override { return owner(name); }
  // With owners, a Muon matrix's averaged gradient exists only on its owner: the global norm
  // sums the shared part (identical everywhere) once and the owned parts across ranks.
  at::Tensor grad_norm() override;
  void scale_grads(const at::Tensor& coef) override;
  void step(double lr) override;
  int64_t step_count() const override { return step_; }

  NamedTensors state_tensors() const override;
  nlohmann::json state_layout() const override;
  void load_state(const std::vector<NamedTensors>& rank_files, const nlohmann::json& layout,
                  int64_t step) override;
  // Reads the AdamW groups' moments (every rank keeps them) and the momentum of the matrices
  // this rank owns, from whichever saving rank's file holds each: a resume at any world size
  // holds this rank's share of the Muon state, never the other owners'. Every tensor is
  // checked (present, shape) from the files' headers, so all ranks reach the same verdict.
  void load_saved_state(const SavedTensors& saved, const nlohmann::json& layout,
                        int64_t step) override;
  // Under dist.tp: each matrix's pieces are gathered whole for Newton-Schulz (on every TP rank
  // of its owner: T times the orthogonalisation work) and the norm counts each piece once.
  bool take_split_matrices(std::shared_ptr<SplitMatrices> split) override {
    split_ = std::move(split);
    return true;
  }
  bool sharded() const override { return group_.size() > 1; }
  std::vector<at::Tensor> replicated_state() const override;
  int64_t state_bytes() const override;

  // Rank that owns Muon matrix `name` (-1: not a Muon matrix).
  int owner(const std::string& name) const;

 private:
  struct Matrix {
    const ParamSegment* seg;
    int owner;
    at::Tensor momentum;  // defined on the owner only
  };
  FlatParams& params_;
  AdamWOptions adam_;
  MuonOptions muon_;
  double base_lr_;
  dist::Group& group_;
  std::vector<Matrix> matrices_;
  struct AdamRange {
    int64_t begin, end;  // element range of the flat buffers
    double peak_lr;      // the group's lr at the schedule's peak
    bool decay;
  };
  std::vector<AdamRange> adam_ranges_;  // the AdamW groups, adjacent equal ranges merged
  at::Tensor exp_avg_, exp_avg_sq_;     // flat; used on adam_ranges_ only
  int64_t step_ = 0;
  std::shared_ptr<SplitMatrices> split_;  // null: matrices are whole
};

}  // namespace lmtrain::optim
