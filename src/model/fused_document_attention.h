// The fused CPU attention kernel (fused_attention.h) over packed rows: each document of a row is
// attended alone, by one kernel call on its own span of rows, so no work is spent on the masked
// pairs between documents and a document's result does not depend on its neighbours at all.
#pragma once
#include <ATen/core/Tensor.h>

#include "model/document_mask.h"

namespace lmtrain::model {

// qkv: (B, T, 3C) float32 CPU contiguous (as fused_causal_attention takes it); docs: a CPU
// layout of the same (B, T). Returns y: (B, T, C), differentiable with respect to qkv.
at::Tensor fused_document_attention(const at::Tensor& qkv, int64_t n_head,
                                    const DocumentLayout& docs);

}  // namespace lmtrain::model
