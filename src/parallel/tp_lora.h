// LoRA adapters (model/lora_adapter.h) under tensor parallelism (tensor_parallel_plan.h), split
// as the layer they sit on (the PEFT + Megatron layout):
//
//   column-parallel layer (c_attn, c_fc, lm_head: W (out, in) split by rows)
//       B (rows, rank) split by rows like W's rows of that projection; A (rank, in) whole.
//       x is the gathered whole sequence: this rank adds scaling * B_r (A x) to its own output
//       rows. A's gradient is a partial sum (B_r's rows only): summed over the TP group by the
//       plan's hook for whole parameters.
//   row-parallel layer (attention's and the MLP's c_proj: W split by input columns)
//       A (rank, in) split by input columns like W; B (out, rank) whole. x is this rank's input
//       features: scaling * B (A_r x_r) is a partial output that joins W_r x_r before the
//       reduce-scatter, so the sum over the ranks is the whole B A x. B's gradient (from the
//       partial A_r x_r) is summed over the TP group by the same hook.
//
// lora.dropout: the column-parallel input is whole, so every rank draws one process's mask;
// the row-parallel input is this rank's features, cut from the whole's mask along them.
//
// Adapter names: "<linear>.lora[_<part>].lora_A" / ".lora_B" (model/lora.h).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "distributed/group.h"
#include "model/dropout.h"
#include "model/layers.h"
#include "parallel/tp_slices.h"

namespace lmtrain::parallel {

// The slice of an adapter parameter on TP rank `rank` of `tp` (pure: from the name and the whole
// shape), or nullopt when `name` is not an adapter's.
std::optional<TpSlice> tp_lora_slice(const std::string& name,
                                     const std::vector<int64_t>& whole_shape, int rank, int tp);

// True for the layers whose output rows are split (their adapters write 1 / tp of their rows).
bool tp_column_parallel_linear(const std::string& linear_name);

// After the plan cut a column-parallel layer's weights and its adapters' B: each adapter's
// output rows and their offset in the layer's local output (every fused part is cut evenly, so
// both divide by tp).
void localize_adapter_rows(model::LinearImpl& layer, int tp);

// x (.., in_local) -> the layer's adapters' sum (.., out_local), each zero-padded to its local
// rows; undefined when the layer has none. lora.dropout's mask (training only) is drawn for
// the whole of which x is part `dropout_split` along `dropout_dim` (model::dropout_part), so
// the split run drops what one process drops.
at::Tensor tp_adapters_delta(const model::LinearImpl& layer, const at::Tensor& x,
                             int64_t dropout_dim, model::DropoutSplit dropout_split);

// The head's adapters added to logits (B, T_seq, V / T) from hidden (B, T_seq, C), on the rows
// with a target only, as one process's loss applies them after dropping the rows without one:
// their dropout then draws one process's masks.
at::Tensor add_head_adapters(const at::Tensor& logits, const at::Tensor& hidden,
                             const at::Tensor& targets, const model::LinearImpl& head);

// The plan's products for a layer with adapters (sequence-parallel, as tp_layers.h's):
// x (B, T_seq / T, in) -> (B, T_seq, out / T), and x (B, T_seq, in / T) -> (B, T_seq / T, out).
at::Tensor column_parallel_lora_linear(const at::Tensor& x, const model::LinearImpl& layer,
                                       dist::Group& group);
at::Tensor row_parallel_lora_linear(const at::Tensor& x, const model::LinearImpl& layer,
                                    dist::Group& group);

}  // namespace lmtrain::parallel
