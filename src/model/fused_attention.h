// Fused causal self-attention for CPU fp32, straight from the packed qkv projection.
//
// The generic path (attention.cpp) reshapes q, k, v out of the (B, T, 3C) projection into
// contiguous (B*H, T, D) copies, runs batched GEMMs that libtorch executes as one tiny GEMM per
// head (plus three tensor selects each), materialises masked scores, and copies the result back
// to (B, T, C); backward does the same in reverse plus a cat. For the small heads of CPU-sized
// models that bookkeeping costs more than the arithmetic. This kernel reads q, k, v in place,
// skips the masked half, writes y directly as (B, T, C), and its backward writes d(qkv)
// directly: one parallel loop over (batch, head) each way. The per-head products are register-
// tiled and skip the masked half (kernels/cpu_kernels.h).
#pragma once
#include <ATen/core/Tensor.h>

namespace lmtrain::model {

// qkv: (B, T, 3C) float32 CPU contiguous, laid out [q | k | v] with heads contiguous inside
// each. Returns y: (B, T, C). Differentiable with respect to qkv.
at::Tensor fused_causal_attention(const at::Tensor& qkv, int64_t n_head);

// Whether the model should use fused_causal_attention for this input: CPU, float32, contiguous,
// and the fused CPU kernels not switched off (kernels/kernel_switch.h).
bool fused_attention_supported(const at::Tensor& qkv);

}  // namespace lmtrain::model
