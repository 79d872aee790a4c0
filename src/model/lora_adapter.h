// One LoRA adapter (Hu et al. 2021) on a Linear: the Linear's output rows
// [row_offset, row_offset + rows) get scaling * B A dropout(x) added. A row slice lets one
// adapter stand for one of the projections fused in a weight (q, k or v of c_attn; SwiGLU's gate
// or up of c_fc), so adapters map 1:1 onto PEFT's q_proj / k_proj / v_proj / gate_proj /
// up_proj adapters. Registered by model/lora.h's apply_lora; a Linear without adapters runs
// exactly its plain forward.
#pragma once
#include <torch/nn/module.h>

#include "model/param_tags.h"

namespace lmtrain::model {

class LoraAdapterImpl : public TaggedModule {
 public:
  // in: the Linear's input width; rows: the output rows this adapter writes. A (rank, in) gets
  // InitRule::kKaimingUniform, B (rows, rank) zeros (the adapter starts as a no-op). Both
  // trainable, decayed only with `decay`, never in Muon's group.
  LoraAdapterImpl(int64_t in, int64_t rows, int64_t row_offset, int64_t rank, double scaling,
                  double dropout, bool decay);
  // x (..., in) -> scaling * B A dropout(x): (..., rows). Dropout only in training mode.
  torch::Tensor delta(const torch::Tensor& x) const;
  // scaling * B A: (rows, in), what merging adds to the weight's rows.
  torch::Tensor merged_delta() const;
  torch::Tensor lora_A, lora_B;
  int64_t row_offset, rows, rank;
  double scaling, dropout;
};
TORCH_MODULE(LoraAdapter);

}  // namespace lmtrain::model
