// The attention's packed QKV projection into per-head q, k, v, with Qwen3's QK-norm and RoPE on
// q and k, as one pass each way (kernels: qkv_split).
//
// libtorch's path narrows q, k, v out of the packed (B, T, (H + 2K) D) projection, normalises
// each head in several fp32 ops, transposes, rotates (another five ops on q and on k), and in the
// backward zero-fills a packed-size gradient per narrow and adds them. The kernel reads each
// packed row once and writes q, k, v in the (B, heads, T, D) layout attention reads; its
// backward writes the packed gradient directly.
#pragma once
#include <ATen/core/Tensor.h>

#include "model/rope_params.h"

namespace lmtrain::model {

struct QkvHeads {
  at::Tensor q;  // (B, H, T, D)
  at::Tensor k;  // (B, K, T, D)
  at::Tensor v;  // (B, K, T, D)
};

struct QkvSplitSpec {
  int64_t n_head = 0, n_kv_head = 0, head_dim = 0;
  at::Tensor q_norm_weight, k_norm_weight;  // (D) each, or both undefined: no QK-norm
  double norm_eps = 1e-6;
  bool rope = false;       // rotate q and k at positions 0 .. T-1
  RopeParams rope_params;  // base and scaling
};

// packed: (B, T, (H + 2K) D). The fused kernel runs when it is switched on for packed's device
// (kernels/kernel_switch.h), packed is fp32 or bf16 and D is even; otherwise libtorch's ops.
QkvHeads qkv_split(const at::Tensor& packed, const QkvSplitSpec& spec);

// The libtorch path (tests hold the kernel to it; q and k may be non-contiguous views).
QkvHeads qkv_split_unfused(const at::Tensor& packed, const QkvSplitSpec& spec);

}  // namespace lmtrain::model
