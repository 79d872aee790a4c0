// Hand-written fp32 CPU kernels for the ops where libtorch's generic CPU path spends most of
// its non-GEMM time in training (measured on 2 cores, see DEVELOPERS.md "CPU kernels"):
// causal attention of small heads, softmax cross-entropy over a large vocabulary, GELU(tanh).
//
// Plain C++ on raw pointers, no torch headers: callers (model/fused_*.cpp) own tensors,
// autograd and threading, and call these from inside at::parallel_for. Each function is
// compiled twice (AVX2+FMA and the baseline ISA) and picks one at run time.
#pragma once
#include <cstddef>
#include <cstdint>

namespace lmtrain::kernels {

// For tests: true makes every kernel run its baseline-ISA variant, false restores the choice
// by CPU (AVX2+FMA where it has them). Not for use while kernels run on other threads.
void use_baseline_isa(bool on);

// ---- Causal attention for one (batch, head) ---------------------------------------------
// q, k, v: T rows of D floats, row stride ld_qkv (e.g. 3C inside a packed (B, T, 3C) qkv).
// P: (T, T) row-major attention probabilities; only the lower triangle (j <= i) is meaningful.
// y, dy: T rows of D floats, row stride ld_y. scale multiplies q.k (1/sqrt(D)).
// scratch: attention_scratch_floats(T, D) floats, private to the calling thread.
size_t attention_scratch_floats(int64_t T, int64_t D);

void attention_forward_head(const float* q, const float* k, const float* v, int64_t ld_qkv,
                            int64_t T, int64_t D, float scale, float* P, float* y, int64_t ld_y,
                            float* scratch);

// Writes dq, dk, dv (row stride ld_qkv, like q/k/v) from the forward's P and y and dy.
void attention_backward_head(const float* q, const float* k, const float* v, int64_t ld_qkv,
                             int64_t T, int64_t D, float scale, const float* P, const float* y,
                             const float* dy, int64_t ld_y, float* dq, float* dk, float* dv,
                             float* scratch);

// ---- Softmax cross-entropy over the columns of transposed logits ------------------------
// logits: (V, cols) row-major with row stride ld, column c holding token c's V logits. For each
// column c: m = max, every entry x_vc is overwritten by exp(x_vc - m), and
// loss[c] = log(sum_v exp(x_vc - m)) + m - x[target[c]][c], inv_sum[c] = 1 / sum_v exp(x_vc - m).
// Targets must be in [0, V) (checked by the caller). The LM head computes W x^T (V, N) rather
// than x W^T (N, V) because MKL runs both passes' large GEMMs faster in that layout on
// small-width models (measured: the logits GEMM ~6%, the weight gradient's ~10%).
void softmax_xent_cols(float* logits, int64_t V, int64_t cols, int64_t ld, const int64_t* targets,
                       float* loss, float* inv_sum);

// ---- GELU with the tanh approximation (GPT-2's "gelu_new") --------------------------------
// y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
void gelu_tanh_forward(const float* x, float* y, int64_t n);
// dx = dy * d gelu(x) / dx
void gelu_tanh_backward(const float* x, const float* dy, float* dx, int64_t n);

// ---- Adam(W) moment and parameter update -------------------------------------------------
// One pass over n elements doing what these libtorch ops do in eight:
//   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
//   p = p - step_size * m / (sqrt(v) / sqrt_bc2 + eps)
// (weight decay is applied to p beforehand by the optimizer, on its decayed ranges only).
struct AdamScalars {
  float beta1, beta2, eps;
  float one_minus_beta1, one_minus_beta2;  // rounded from double, as libtorch does
  float step_size;                         // lr / (1 - beta1^t)
  float sqrt_bc2;                          // sqrt(1 - beta2^t)
};
void adam_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamScalars& s);

}  // namespace lmtrain::kernels
