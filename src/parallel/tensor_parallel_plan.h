// Tensor parallelism with sequence parallelism (dist.tp = T): Megatron-LM's plan applied to a
// built decoder from outside the model, as torchtitan's parallelize_llama does. Each block's
// c_attn (q, k, v heads) and MLP c_fc (up, and SwiGLU's gate) become column-parallel, attention's
// and the MLP's c_proj row-parallel (tp_layers.h); the token table and the LM head are split by
// vocabulary rows and the loss is the vocabulary-parallel cross-entropy (vocab_parallel_loss.h),
// so the (N, V) logits are never whole. Between the blocks' parallel regions the residual stream
// is split along the sequence: (B, T_seq / T, C) on each rank, so norms run on 1 / T of the
// tokens, and the regions' crossings are all-gathers and reduce-scatters instead of all-reduces.
// Attention runs on this rank's H / T query heads and K / T key/value heads (GQA: K must divide
// by T; KV heads are not replicated).
//
// The model makes no collective call: the plan sets the layers' products (LinearImpl::set_product),
// the lookups (EmbeddingImpl::set_lookup), the loss (GptImpl::set_loss_head) and the local head
// and MLP widths. Parameters every rank holds whole (norms, biases of row-parallel layers, the
// position table, QK-norm weights) see 1 / T of the tokens or heads, so their gradients are
// summed over the TP group by a hook before they accumulate.
//
// Mixture-of-Experts layers (model.moe.*) are replicated over the TP group, not split: each TP
// rank routes the tokens of its sequence shard through all the experts, the router and any
// shared experts, whose gradients (partial sums over its tokens) the same hook completes. Of the
// two natural plans this is the smaller step: splitting the experts over the TP ranks (expert
// parallelism inside the TP group, tokens sent by all-to-all) would need a second dispatcher
// layout, whereas replication keeps dist.ep free to spread the experts over the data-parallel
// ranks later. What crosses the TP group is the layer's token statistics (MoeImpl's
// TokenShards, model/moe_routing.h): the expert loads, the sum of router probabilities and the
// z-loss's sum are totalled over the TP ranks (reduce_from_tp) before the balancing losses are
// formed, so they, the logged loads and the balancing bias equal one process's. Under a capacity
// (model.moe.capacity_factor > 0), whose ranking spans all of a forward's tokens, the ranks'
// expert choices are all-gathered and each keeps its part of the whole forward's plan.
//
// Mesh: TP inner (ranks [g T, (g+1) T) form TP group g), data parallelism outer (ranks
// {i, i + T, ...} form DP group i); the TP ranks of one DP replica read the same batch.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/sharded_reader.h"
#include "checkpoint/sharded_save.h"
#include "distributed/group.h"
#include "model/dropout.h"
#include "model/gpt.h"
#include "optim/flat_params.h"
#include "parallel/tp_slices.h"

namespace torch::autograd {
struct Node;
}

namespace lmtrain::parallel {

// The 2-D mesh's groups of this rank. Every rank calls it (Group::split is collective).
struct TpGroups {
  std::unique_ptr<dist::Group> tp;  // the T ranks that split each layer
  std::unique_ptr<dist::Group> dp;  // the ranks holding the same slices (a one-rank group at T = W)
};
TpGroups make_tp_groups(dist::Group& world, int tp);

// How TensorParallel finds its slices' values: cut from a whole model already placed, or (the
// set-up that never holds the whole model, tp_local_init.h) drawn from the seed parameter by
// parameter out of a model built unwritten on the CPU in fp32, then placed on `device` in
// `dtype` as build_model places a model.
struct TpFromSeed {
  c10::Device device = c10::Device(c10::kCPU);
  at::ScalarType dtype = at::kFloat;
};

class TensorParallel {
 public:
  // Takes a whole model (the same on every TP rank: built from one seed), keeps this rank's
  // slices of the split parameters and installs the plan. Before FlatParams is made. With
  // `from_seed`, the model was built unwritten (model::BuildOptions::init = false) on the CPU
  // in fp32 and the global CPU generator is seeded as for build_model: each parameter's initial
  // weights are drawn whole, one at a time, and this rank's slice kept
  // (init_tp_slices_from_seed), bit for bit the slices of the whole model build_model draws.
  TensorParallel(model::GptImpl& model, dist::Group& tp,
                 const std::optional<TpFromSeed>& from_seed = std::nullopt);
  TensorParallel(const TensorParallel&) = delete;
  TensorParallel& operator=(const TensorParallel&) = delete;

  // name -> this rank's slice, for every parameter of the model.
  const std::map<std::string, TpSlice>& slices() const { return slices_; }
  int size() const { return tp_.size(); }
  int rank() const { return tp_.rank(); }
  // How this rank's activations cut one process's (sequence shards, head groups: both dim 1),
  // for the trainer's dropout scopes: the split run then drops what one process drops.
  model::DropoutSplit dropout_split() const { return {tp_.size(), tp_.rank()}; }

  // Checkpoints (checkpoint/sharded_save.h): every split parameter's slices on every TP rank,
  // and this rank's part of a whole tensor read back (parameter or moment, by parameter name;
  // the tensor itself for one held whole, or of a shape other than the model's: the load
  // then names it).
  std::map<std::string, train::TpSplit> checkpoint_splits() const;
  at::Tensor local_piece(const std::string& name, const at::Tensor& whole) const;
  // This rank's slices of a checkpoint's whole tensors, whatever layout saved them
  // (checkpoint/sharded_reader.h): local_piece's cut, and the rows it keeps for reads by range.
  // It refers to this plan, which must outlive it.
  train::TensorLocalizer localizer() const;

  // The model's gradient norm (float64 scalar) from flat gradient elements [begin, end) of this
  // rank (an optimizer shard, or all of them): split parameters counted on each TP rank, whole
  // ones once; summed over `shard_group` when the ranks of it hold different elements.
  at::Tensor grad_norm(const optim::FlatParams& flat, int64_t begin, int64_t end,
                       dist::Group* shard_group) const;

  // Collective over the TP group: every split parameter whole on every rank (for a save), and
  // back to this rank's slice (the same storage as before: the flat buffers' views).
  void gather_whole();
  void release_whole();

 private:
  model::GptImpl& model_;
  dist::Group& tp_;
  std::map<std::string, TpSlice> slices_;
  std::vector<std::pair<at::Tensor, at::Tensor>> held_;  // (parameter, its slice) while whole
  // The gradient accumulators of whole parameters, kept alive with their hook (a node pre-hook:
  // it runs when the accumulator does, once, and not for activation checkpointing's
  // autograd::grad over the same leaves, as a tensor hook would).
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
};

}  // namespace lmtrain::parallel
