// The per-element math of the fused GPU kernels (kernels/cuda/*.cu), shared word for word with
// their CPU references (kernels/fused_reference.h): llm.c's discipline, so that a CPU test of a
// reference tests the formulas the GPU runs. Each function is one element's (or one pair's)
// arithmetic in fp32; the row reductions (sums over a row) are done by the caller, by a warp on
// the GPU and by a loop on the CPU.
//
// No torch and no CUDA headers: this file compiles as plain C++ and under nvcc.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define LMTRAIN_HD __host__ __device__ __forceinline__
#else
#define LMTRAIN_HD inline
#endif

namespace lmtrain::kernels {

// ---- Storage rounding --------------------------------------------------------------------
// bf16 kernels compute in fp32 and store bf16: `bf16_round` is what a store then a load gives
// (round to nearest, ties to even, NaN kept), so the CPU reference rounds exactly where the
// kernel stores.
LMTRAIN_HD float bf16_round(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) return x;  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u;
  float r;
  memcpy(&r, &u, sizeof r);
  return r;
}

LMTRAIN_HD float store_round(float x, bool bf16) { return bf16 ? bf16_round(x) : x; }

// ---- LayerNorm / RMSNorm over a row of C ------------------------------------------------
// Forward: h = x + delta (the residual add, rounded to the storage type: h is an output the
// next residual add reads), mean = sum(h) / C (0 for RMSNorm), var = sum((h - mean)^2) / C,
// rstd = 1 / sqrt(var + eps), y = (h - mean) * rstd * w + b.
LMTRAIN_HD float norm_rstd(float centred_square_sum, int64_t C, float eps) {
  return 1.0f / sqrtf(centred_square_sum / static_cast<float>(C) + eps);
}

LMTRAIN_HD float norm_output(float h, float mean, float rstd, float w, float b) {
  return (h - mean) * rstd * w + b;
}

// Backward of one element. With g = dy * w and xhat = (h - mean) * rstd, the row sums
// mean_g = sum(g) / C (0 for RMSNorm: no mean was subtracted) and mean_gx = sum(g * xhat) / C,
// dh = rstd * (g - mean_g - xhat * mean_gx). The caller adds the gradient that reaches h
// directly (the residual stream) and accumulates dw += dy * xhat, db += dy over rows.
LMTRAIN_HD float norm_input_grad(float g, float xhat, float rstd, float mean_g, float mean_gx) {
  return rstd * (g - mean_g - xhat * mean_gx);
}

// ---- SwiGLU: y = silu(gate) * up ---------------------------------------------------------
LMTRAIN_HD float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

LMTRAIN_HD float swiglu_output(float gate, float up) { return gate * sigmoid(gate) * up; }

// d silu(g) / dg = s (1 + g (1 - s)) with s = sigmoid(g).
LMTRAIN_HD void swiglu_grads(float gate, float up, float dy, float* dgate, float* dup) {
  const float s = sigmoid(gate);
  *dgate = dy * up * s * (1.0f + gate * (1.0f - s));
  *dup = dy * gate * s;
}

// ---- Rotary position embedding on one pair ----------------------------------------------
// The half-split convention of Llama / Qwen (HF's rotate_half): element i < D/2 pairs with
// i + D/2, rotated by the angle pos * theta^(-2i/D). The backward is the inverse rotation.
LMTRAIN_HD void rope_rotate(float x1, float x2, float c, float s, float* y1, float* y2) {
  *y1 = x1 * c - x2 * s;
  *y2 = x2 * c + x1 * s;
}

LMTRAIN_HD void rope_rotate_back(float dy1, float dy2, float c, float s, float* dx1, float* dx2) {
  *dx1 = dy1 * c + dy2 * s;
  *dx2 = dy2 * c - dy1 * s;
}

// ---- Packed QKV layout ---------------------------------------------------------------------
// The attention's input projection gives packed (B, T, (H + 2K) D): H query heads, then K key
// heads, then K value heads. Row (b, t, slot j) goes to one head's (T, D) plane of q
// (B, H, T, D), k or v (B, K, T, D).
struct QkvShape {
  int64_t B, T, H, K, D;
};
enum class QkvPart { kQuery, kKey, kValue };
struct QkvRow {
  QkvPart part;
  int64_t offset;    // of the row's D values in q, k or v
  int64_t norm_row;  // index into the QK-norm statistics (B, T, H + K); unused for v
};

LMTRAIN_HD QkvRow qkv_row(const QkvShape& s, int64_t b, int64_t t, int64_t j) {
  const int64_t norm_row = (b * s.T + t) * (s.H + s.K) + j;
  if (j < s.H) return {QkvPart::kQuery, ((b * s.H + j) * s.T + t) * s.D, norm_row};
  if (j < s.H + s.K) return {QkvPart::kKey, ((b * s.K + j - s.H) * s.T + t) * s.D, norm_row};
  return {QkvPart::kValue, ((b * s.K + j - s.H - s.K) * s.T + t) * s.D, norm_row};
}

template <class T>
LMTRAIN_HD T* qkv_pick(QkvPart part, T* q, T* k, T* v) {
  return part == QkvPart::kQuery ? q : part == QkvPart::kKey ? k : v;
}

// ---- Classifier: the cross-entropy of one row of V logits, with its gradient ----------------
// The LM head's loss (model/chunked_cross_entropy.cpp) on the logits l of a chunk of rows, as
// llm.c's fused classifier: with the soft cap (nanochat, Gemma) z = cap tanh(l / cap), else
// z = l; loss = log(sum exp z) - z[target]; and in place of l the gradient
// scale (softmax(z) - onehot(target)) dz/dl, with dz/dl = 1 - (z / cap)^2 under the cap.
// Two reads of the row and one write, where the unfused ops make about ten passes over
// (rows, V) in fp32.
LMTRAIN_HD float classifier_logit(float l, float cap) { return cap > 0 ? cap * tanhf(l / cap) : l; }

// Softmax statistics of the values seen so far: their max and sum exp(z - max) ("online
// softmax"). Start from {-inf, 0}; partial statistics of disjoint parts merge in any grouping.
struct SoftmaxStats {
  float max;
  float sum;
};

LMTRAIN_HD SoftmaxStats softmax_stats_merge(SoftmaxStats a, SoftmaxStats b) {
  if (a.sum == 0.0f) return b;  // nothing seen on one side (also keeps -inf - -inf out)
  if (b.sum == 0.0f) return a;
  const float m = a.max > b.max ? a.max : b.max;
  return {m, a.sum * expf(a.max - m) + b.sum * expf(b.max - m)};
}

// One more value: one exp, rescaling the sum when the max moves.
LMTRAIN_HD SoftmaxStats softmax_stats_add(SoftmaxStats a, float z) {
  if (z > a.max) return {z, a.sum * expf(a.max - z) + 1.0f};
  return {a.max, a.sum + expf(z - a.max)};
}

// -log softmax(z)[target] from the row's statistics and the target's z.
LMTRAIN_HD float classifier_loss(SoftmaxStats st, float z_target) {
  return logf(st.sum) + st.max - z_target;
}

// d(scale * loss) / dl for one logit.
LMTRAIN_HD float classifier_logit_grad(float z, SoftmaxStats st, bool is_target, float scale,
                                       float cap) {
  float d = expf(z - st.max) / st.sum - (is_target ? 1.0f : 0.0f);
  if (cap > 0) d *= 1.0f - (z / cap) * (z / cap);
  return d * scale;
}

}  // namespace lmtrain::kernels
