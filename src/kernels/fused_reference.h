// CPU references of the fused GPU kernels (kernels/cuda/*.cu). They run the same per-element
// math (kernels/fused_math.h) in the same order of stores and roundings, on fp32 arrays: with
// `bf16` set they round every value the kernel stores in bf16, so a bf16 tensor converted to fp32,
// run through the reference and converted back is what the kernel gives (up to the order of the
// fp32 row sums). Tests hold them to libtorch's ops (forward) and autograd (backward); on a GPU
// the kernels are held to the unfused libtorch path (tests/cuda).
//
// Plain C++ on raw pointers, single-threaded, no torch headers: a reference, not a CPU fast
// path (the model uses libtorch's ops on the CPU unless train.fused_kernels=on).
#pragma once
#include <cstdint>

#include "kernels/fused_math.h"

namespace lmtrain::kernels {

// ---- Residual add + LayerNorm / RMSNorm over rows of C ------------------------------------
// x, delta: (N, C); delta may be null (a plain norm: h = x). w: (C); b: (C) or null (no bias,
// and always null for RMSNorm). Writes h = x + delta (N, C) (when delta is given), y (N, C),
// mean (N) (zeros for RMSNorm) and rstd (N), which the backward reads. bf16: h is stored in bf16
// (x's type); bf16_y: y is (under autocast y may be bf16 while h stays fp32).
void add_norm_forward_reference(const float* x, const float* delta, const float* w, const float* b,
                                int64_t N, int64_t C, float eps, bool rms, bool bf16, bool bf16_y,
                                float* h, float* y, float* mean, float* rstd);

// dy: (N, C), the gradient of y; dh: (N, C) or null, the gradient that reaches h directly.
// Writes dx (N, C) = dh + the norm's input gradient (also the gradient of delta), and adds the
// row sums of dy * xhat into dw (C) and of dy into db (C, or null).
void add_norm_backward_reference(const float* h, const float* w, const float* mean,
                                 const float* rstd, const float* dy, const float* dh, int64_t N,
                                 int64_t C, bool rms, bool bf16, float* dx, float* dw, float* db);

// ---- SwiGLU over rows of [gate (H); up (H)] ----------------------------------------------
// h: (N, 2H) -> y: (N, H) = silu(gate) * up.
void swiglu_forward_reference(const float* h, int64_t N, int64_t H, bool bf16, float* y);
// dy: (N, H) -> dh: (N, 2H).
void swiglu_backward_reference(const float* h, const float* dy, int64_t N, int64_t H, bool bf16,
                               float* dh);

// ---- Packed QKV -> q, k, v with per-head RMSNorm (QK-norm) and RoPE ------------------------
// packed: (B, T, (H + 2K) D), the output of the attention's input projection: H query heads,
// then K key heads, then K value heads, D each. q_w, k_w: (D) QK-norm weights, or both null (no
// QK-norm). cos, sin: (T, D/2) of the angles t * inv_freq_i, or both null (no rotation).
// Writes q (B, H, T, D), k (B, K, T, D), v (B, K, T, D) and, with QK-norm, rstd (B, T, H + K).
void qkv_split_forward_reference(const float* packed, const float* q_w, const float* k_w,
                                 const float* cos, const float* sin, const QkvShape& s, float eps,
                                 bool bf16, float* q, float* k, float* v, float* rstd);
// dq, dk, dv in the layouts of q, k, v -> dpacked (B, T, (H + 2K) D); with QK-norm, adds the
// weights' gradients into dq_w and dk_w (D).
void qkv_split_backward_reference(const float* packed, const float* q_w, const float* k_w,
                                  const float* cos, const float* sin, const QkvShape& s,
                                  const float* rstd, const float* dq, const float* dk,
                                  const float* dv, bool bf16, float* dpacked, float* dq_w,
                                  float* dk_w);

// ---- Classifier: cross-entropy over rows of V logits, the gradient in place ---------------
// logits: (n, V); targets: (n), each in [0, V) (a row without a target has any index in range
// and row_scale 0); row_scale: (n), the factor of each row's loss in the caller's total (1 /
// the count of rows with a target, 0 for the rest). cap: the soft cap, or <= 0 for none.
// Writes loss (n) = -log softmax(z)[target], unscaled, and with `write_grad` replaces the
// logits by d(sum_r row_scale_r loss_r) / dlogits, stored with bf16 rounding when `bf16`.
void classifier_reference(float* logits, const int64_t* targets, const float* row_scale, int64_t n,
                          int64_t V, float cap, bool bf16, bool write_grad, float* loss);

}  // namespace lmtrain::kernels
