#include "model/fused_attention.h"

#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

namespace lmtrain::model {
namespace {

// Kernels are compiled twice: for AVX2+FMA (chosen at run time when the CPU has it) and for
// the baseline ISA. The loops are written so the compiler vectorises the innermost one.
#define LMTRAIN_KERNEL_BODY                                                                      \
  /* exp(x) for x <= 0 (softmax after subtracting the row max): Cephes' expf polynomial, */      \
  /* relative error ~1e-7; unlike std::exp it vectorises inside the loops below.        */       \
  static inline float exp_nonpositive(float x) {                                                 \
    x = x < -87.0f ? -87.0f : x;                                                                 \
    const float kf = __builtin_floorf(x * 1.44269504088896341f + 0.5f);                          \
    const float r = x - kf * 0.693359375f + kf * 2.12194440e-4f;                                 \
    float p = 1.9875691500e-4f;                                                                  \
    p = p * r + 1.3981999507e-3f;                                                                \
    p = p * r + 8.3334519073e-3f;                                                                \
    p = p * r + 4.1665795894e-2f;                                                                \
    p = p * r + 1.6666665459e-1f;                                                                \
    p = p * r + 5.0000001201e-1f;                                                                \
    const float e = p * r * r + r + 1.0f;                                                        \
    const int32_t bits = (static_cast<int32_t>(kf) + 127) << 23;                                 \
    float two_k;                                                                                 \
    __builtin_memcpy(&two_k, &bits, sizeof(two_k));                                              \
    return e * two_k;                                                                            \
  }                                                                                              \
  /* Forward for one (b, h): P (T, T) row-major (upper triangle left untouched), y rows. */      \
  static void forward_head(const float* __restrict q, const float* __restrict k,                 \
                           const float* __restrict v, int64_t row_stride, int64_t T, int64_t D,  \
                           float scale, float* __restrict kt, float* __restrict P,               \
                           float* __restrict y, int64_t y_stride) {                              \
    /* kt: (D, T) transposed keys so score rows vectorise over keys. */                          \
    for (int64_t j = 0; j < T; ++j)                                                              \
      for (int64_t d = 0; d < D; ++d) kt[d * T + j] = k[j * row_stride + d];                     \
    for (int64_t i = 0; i < T; ++i) {                                                            \
      float* __restrict s = P + i * T;                                                           \
      const int64_t n = i + 1;                                                                   \
      for (int64_t j = 0; j < n; ++j) s[j] = 0.f;                                                \
      for (int64_t d = 0; d < D; ++d) {                                                          \
        const float qd = q[i * row_stride + d] * scale;                                          \
        const float* __restrict kd = kt + d * T;                                                 \
        for (int64_t j = 0; j < n; ++j) s[j] += qd * kd[j];                                      \
      }                                                                                          \
      float mx = -std::numeric_limits<float>::infinity();                                        \
      _Pragma("omp simd reduction(max : mx)") for (int64_t j = 0; j < n; ++j) mx =               \
          s[j] > mx ? s[j] : mx;                                                                 \
      for (int64_t j = 0; j < n; ++j) s[j] = exp_nonpositive(s[j] - mx);                         \
      float sum = 0.f;                                                                           \
      _Pragma("omp simd reduction(+ : sum)") for (int64_t j = 0; j < n; ++j) sum += s[j];        \
      const float inv = 1.f / sum;                                                               \
      for (int64_t j = 0; j < n; ++j) s[j] *= inv;                                               \
      float* __restrict yi = y + i * y_stride;                                                   \
      for (int64_t d = 0; d < D; ++d) yi[d] = 0.f;                                               \
      for (int64_t j = 0; j < n; ++j) {                                                          \
        const float p = s[j];                                                                    \
        const float* __restrict vj = v + j * row_stride;                                         \
        for (int64_t d = 0; d < D; ++d) yi[d] += p * vj[d];                                      \
      }                                                                                          \
    }                                                                                            \
  }                                                                                              \
  /* Backward for one (b, h). dq/dk/dv rows have stride row_stride like q/k/v. Computes the  */  \
  /* full dS (T, T) first, then each output row as a local accumulation over one index, so    */ \
  /* the accumulator stays in L1 while the operand rows stream.                               */ \
  static void backward_head(const float* __restrict q, const float* __restrict k,                \
                            const float* __restrict v, int64_t row_stride, int64_t T, int64_t D, \
                            float scale, const float* __restrict P, const float* __restrict dy,  \
                            const float* __restrict y, int64_t y_stride, float* __restrict vt,   \
                            float* __restrict dS, float* __restrict dq, float* __restrict dk,    \
                            float* __restrict dv) {                                              \
    for (int64_t j = 0; j < T; ++j)                                                              \
      for (int64_t d = 0; d < D; ++d) vt[d * T + j] = v[j * row_stride + d];                     \
    for (int64_t i = 0; i < T; ++i) {                                                            \
      const int64_t n = i + 1;                                                                   \
      const float* __restrict p = P + i * T;                                                     \
      const float* __restrict dyi = dy + i * y_stride;                                           \
      float* __restrict ds = dS + i * T;                                                         \
      /* dP_ij = dy_i . v_j ; delta_i = dy_i . y_i ; dS_ij = scale * P_ij (dP_ij - delta_i) */   \
      for (int64_t j = 0; j < n; ++j) ds[j] = 0.f;                                               \
      for (int64_t d = 0; d < D; ++d) {                                                          \
        const float g = dyi[d];                                                                  \
        const float* __restrict vd = vt + d * T;                                                 \
        for (int64_t j = 0; j < n; ++j) ds[j] += g * vd[j];                                      \
      }                                                                                          \
      float delta = 0.f;                                                                         \
      const float* __restrict yi = y + i * y_stride;                                             \
      for (int64_t d = 0; d < D; ++d) delta += dyi[d] * yi[d];                                   \
      for (int64_t j = 0; j < n; ++j) ds[j] = p[j] * (ds[j] - delta) * scale;                    \
      /* dq_i = sum_j dS_ij k_j */                                                               \
      float* __restrict dqi = dq + i * row_stride;                                               \
      for (int64_t d = 0; d < D; ++d) dqi[d] = 0.f;                                              \
      for (int64_t j = 0; j < n; ++j) {                                                          \
        const float sij = ds[j];                                                                 \
        const float* __restrict kj = k + j * row_stride;                                         \
        for (int64_t d = 0; d < D; ++d) dqi[d] += sij * kj[d];                                   \
      }                                                                                          \
    }                                                                                            \
    /* dk_j = sum_{i>=j} dS_ij q_i ; dv_j = sum_{i>=j} P_ij dy_i */                              \
    for (int64_t j = 0; j < T; ++j) {                                                            \
      float* __restrict dkj = dk + j * row_stride;                                               \
      float* __restrict dvj = dv + j * row_stride;                                               \
      for (int64_t d = 0; d < D; ++d) dkj[d] = dvj[d] = 0.f;                                     \
      for (int64_t i = j; i < T; ++i) {                                                          \
        const float sij = dS[i * T + j], pij = P[i * T + j];                                     \
        const float* __restrict qi = q + i * row_stride;                                         \
        const float* __restrict dyi = dy + i * y_stride;                                         \
        for (int64_t d = 0; d < D; ++d) {                                                        \
          dkj[d] += sij * qi[d];                                                                 \
          dvj[d] += pij * dyi[d];                                                                \
        }                                                                                        \
      }                                                                                          \
    }                                                                                            \
  }

namespace avx2 {
#pragma GCC push_options
#pragma GCC target("avx2,fma")
LMTRAIN_KERNEL_BODY
#pragma GCC pop_options
}  // namespace avx2

namespace generic {
LMTRAIN_KERNEL_BODY
}  // namespace generic

#undef LMTRAIN_KERNEL_BODY

bool has_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}

struct Shape {
  int64_t B, T, C, H, D;
  float scale;
};

Shape shape_of(const at::Tensor& qkv, int64_t n_head) {
  Shape s;
  s.B = qkv.size(0);
  s.T = qkv.size(1);
  s.C = qkv.size(2) / 3;
  s.H = n_head;
  s.D = s.C / n_head;
  s.scale = 1.f / std::sqrt(static_cast<float>(s.D));
  return s;
}

// P: (B, H, T, T) attention probabilities (lower triangle), y: (B, T, C).
void attention_forward(const at::Tensor& qkv, const Shape& s, at::Tensor& P, at::Tensor& y) {
  const float* base = qkv.data_ptr<float>();
  float* pbase = P.data_ptr<float>();
  float* ybase = y.data_ptr<float>();
  const int64_t row = 3 * s.C;
  const bool fast = has_avx2();
  at::parallel_for(0, s.B * s.H, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> kt(s.D * s.T);
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / s.H, h = bh % s.H;
      const float* q = base + b * s.T * row + h * s.D;
      const float* k = q + s.C;
      const float* v = q + 2 * s.C;
      float* p = pbase + bh * s.T * s.T;
      float* yo = ybase + b * s.T * s.C + h * s.D;
      if (fast) {
        avx2::forward_head(q, k, v, row, s.T, s.D, s.scale, kt.data(), p, yo, s.C);
      } else {
        generic::forward_head(q, k, v, row, s.T, s.D, s.scale, kt.data(), p, yo, s.C);
      }
    }
  });
}

at::Tensor attention_backward(const at::Tensor& qkv, const at::Tensor& P, const at::Tensor& y,
                              const at::Tensor& dy_in, const Shape& s) {
  auto dy = dy_in.contiguous();
  auto dqkv = at::empty_like(qkv);
  const float* base = qkv.data_ptr<float>();
  const float* pbase = P.data_ptr<float>();
  const float* ybase = y.data_ptr<float>();
  const float* dybase = dy.data_ptr<float>();
  float* gbase = dqkv.data_ptr<float>();
  const int64_t row = 3 * s.C;
  const bool fast = has_avx2();
  at::parallel_for(0, s.B * s.H, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> vt(s.D * s.T), ds(s.T * s.T);
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / s.H, h = bh % s.H;
      const int64_t qoff = b * s.T * row + h * s.D, yoff = b * s.T * s.C + h * s.D;
      const float* q = base + qoff;
      float* dq = gbase + qoff;
      const float* p = pbase + bh * s.T * s.T;
      if (fast) {
        avx2::backward_head(q, q + s.C, q + 2 * s.C, row, s.T, s.D, s.scale, p, dybase + yoff,
                            ybase + yoff, s.C, vt.data(), ds.data(), dq, dq + s.C, dq + 2 * s.C);
      } else {
        generic::backward_head(q, q + s.C, q + 2 * s.C, row, s.T, s.D, s.scale, p, dybase + yoff,
                               ybase + yoff, s.C, vt.data(), ds.data(), dq, dq + s.C, dq + 2 * s.C);
      }
    }
  });
  return dqkv;
}

class FusedCausalAttention : public torch::autograd::Function<FusedCausalAttention> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& qkv,
                            int64_t n_head) {
    const Shape s = shape_of(qkv, n_head);
    auto P = at::empty({s.B, s.H, s.T, s.T}, qkv.options());
    auto y = at::empty({s.B, s.T, s.C}, qkv.options());
    attention_forward(qkv, s, P, y);
    ctx->save_for_backward({qkv, P, y});
    ctx->saved_data["n_head"] = n_head;
    return y;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    auto saved = ctx->get_saved_variables();
    const Shape s = shape_of(saved[0], ctx->saved_data["n_head"].toInt());
    return {attention_backward(saved[0], saved[1], saved[2], grads[0], s), at::Tensor()};
  }
};

}  // namespace

bool fused_attention_supported(const at::Tensor& qkv) {
  // Opt-in (LMTRAIN_FUSED_ATTENTION=1): measured on 2 cores it is on par with the generic
  // path (bench-small: 13.0k vs 13.1k tok/s; gpt2-small-cpu: 1.59-1.61k vs 1.62-1.63k tok/s),
  // so the generic path stays the default until the kernel is tiled to beat BLAS.
  static const bool enabled = [] {
    const char* env = std::getenv("LMTRAIN_FUSED_ATTENTION");
    return env && std::string(env) == "1";
  }();
  return enabled && qkv.device().is_cpu() && qkv.scalar_type() == at::kFloat && qkv.dim() == 3 &&
         qkv.is_contiguous();
}

at::Tensor fused_causal_attention(const at::Tensor& qkv, int64_t n_head) {
  return FusedCausalAttention::apply(qkv, n_head);
}

}  // namespace lmtrain::model
