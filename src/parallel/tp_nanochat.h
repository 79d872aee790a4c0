// nanochat's newer parts (model.value_embeds, smear, backout, x0_lambdas, embed_norm; model/gpt.h
// NanochatPartsImpl) under tensor parallelism with sequence parallelism (tensor_parallel_plan.h):
//
//   value embeddings  value_embeds.{l}.weight (V, K D) is split by columns, this rank's K / tp
//                     kv heads (not by vocabulary rows like wte): every rank holds the whole
//                     batch's ids, so its lookup of its own columns gives exactly the
//                     (B, T_seq, K / tp D) that its attention adds to its own v heads, with no
//                     collective in either direction and a gradient already complete.
//   ve_gate           transformer.h.{l}.attn.ve_gate.weight (K, 12): column-parallel like
//                     c_attn, this rank's K / tp heads' rows; it all-gathers only the 12
//                     channels it reads of the sequence shard, and reduce-scatters their gradient.
//   smear             x_t += lambda sigmoid(gate(x_t[:24])) x_{t-1} crosses the shard boundary:
//                     the first position of a shard needs the previous rank's last (a halo,
//                     tp_regions.h shift_sequence_right), installed from outside the model as
//                     GptImpl::SequencePiece; with packed documents the piece's own positions say
//                     where a document starts.
//   backout, x0 / resid lambdas, embed_norm, smear's gate and lambda
//                     per position or scalar: they run on the sequence shards with their
//                     parameters whole on every rank, whose gradients (partial sums over this
//                     rank's positions) the plan's hook sums over the TP group, as the norms'.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "distributed/group.h"
#include "model/gpt.h"
#include "parallel/tp_slices.h"

namespace lmtrain::parallel {

// The slice of a value embedding or value-embedding gate on TP rank `rank` of `tp` (pure: from
// the shape, the name and the whole shape), or nullopt for any other parameter.
std::optional<TpSlice> tp_nanochat_slice(const model::GptConfig& cfg, const std::string& name,
                                         const std::vector<int64_t>& whole_shape, int rank, int tp);

// The plan's side for these parts on a model whose parameters already hold their slices: the
// gates' column-parallel products and the smear's halo. No-op for a model without them.
void install_tp_nanochat(model::GptImpl& model, dist::Group& tp);

}  // namespace lmtrain::parallel
