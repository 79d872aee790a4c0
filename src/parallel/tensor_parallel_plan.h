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
// Mesh: TP inner (ranks [g T, (g+1) T) form TP group g), data parallelism outer (ranks
// {i, i + T, ...} form DP group i); the TP ranks of one DP replica read the same batch.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/sharded_save.h"
#include "distributed/group.h"
#include "model/dropout.h"
#include "model/gpt.h"
#include "optim/flat_params.h"

namespace torch::autograd {
struct Node;
}

namespace lmtrain::parallel {

// How one parameter is split across the TP group, for checkpoints that reshard: its whole
// shape, the dim it is split along (-1: every rank holds it whole) and the [begin, end) ranges
// of that dim this rank holds, concatenated in this order into its local tensor (c_attn's q, k
// and v rows, SwiGLU's gate and up rows are two or three ranges; everything else one).
struct TpSlice {
  std::vector<int64_t> whole_shape;
  int64_t dim = -1;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  bool sharded() const { return dim >= 0; }
};

// The 2-D mesh's groups of this rank. Every rank calls it (Group::split is collective).
struct TpGroups {
  std::unique_ptr<dist::Group> tp;  // the T ranks that split each layer
  std::unique_ptr<dist::Group> dp;  // the ranks holding the same slices (a one-rank group at T = W)
};
TpGroups make_tp_groups(dist::Group& world, int tp);

// What the plan cannot split, refused naming the config key: heads, KV heads, MLP width,
// vocabulary and data.seq_len must divide by tp; MoE and nanochat's extra parts are not
// supported with dist.tp > 1.
void check_tensor_parallel(const model::GptConfig& cfg, int64_t seq_len, int tp);

// Every parameter's slice on TP rank `rank` of `tp` for a decoder of shape `cfg` (parameter
// names as GptImpl registers them). Pure: no model or group needed.
TpSlice tensor_parallel_slice(const model::GptConfig& cfg, const std::string& name,
                              const std::vector<int64_t>& whole_shape, int rank, int tp);

class TensorParallel {
 public:
  // Takes a whole model (the same on every TP rank: built from one seed), keeps this rank's
  // slices of the split parameters and installs the plan. Before FlatParams is made.
  TensorParallel(model::GptImpl& model, dist::Group& tp);
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
