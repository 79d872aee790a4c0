// Which part of each parameter a tensor-parallel rank holds (dist.tp; the plan that computes with
// them is tensor_parallel_plan.h): pure functions of the decoder's shape, a parameter's name and
// whole shape, no model or group needed, so checkpoints, `lmtrain plan` and the set-up that
// never holds the whole model (tp_local_init.h) agree on them.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/gpt_config.h"

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

// What the plan cannot split, refused naming the config key: heads, KV heads, MLP width,
// vocabulary and data.seq_len must divide by tp (MoE layers are replicated over the TP group).
void check_tensor_parallel(const model::GptConfig& cfg, int64_t seq_len, int tp);

// Every parameter's slice on TP rank `rank` of `tp` for a decoder of shape `cfg` (parameter
// names as GptImpl registers them).
TpSlice tensor_parallel_slice(const model::GptConfig& cfg, const std::string& name,
                              const std::vector<int64_t>& whole_shape, int rank, int tp);

// This rank's tensor of `whole` (its slice's ranges along slice.dim, concatenated; contiguous),
// or `whole` itself for a slice held whole.
at::Tensor tp_local_piece(const at::Tensor& whole, const TpSlice& s);

}  // namespace lmtrain::parallel
