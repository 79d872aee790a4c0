#include "kernels/cpu_kernels.h"

#include <atomic>
#include <cmath>
#include <cstdint>

namespace lmtrain::kernels {
namespace {

#if defined(__x86_64__) || defined(__i386__)
#define LMTRAIN_HAVE_AVX2_VARIANT 1
namespace avx2 {
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#include "kernels/cpu_kernels_body.inc"
#pragma GCC pop_options
}  // namespace avx2
#else
#define LMTRAIN_HAVE_AVX2_VARIANT 0
#endif

namespace generic {
#include "kernels/cpu_kernels_body.inc"
}  // namespace generic

bool detect_avx2_fma() {
#if LMTRAIN_HAVE_AVX2_VARIANT
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

const bool kAvx2 = detect_avx2_fma();
// Cleared by use_baseline_isa(true): tests run the baseline variants on AVX2 machines too.
std::atomic<bool> use_avx2{kAvx2};

}  // namespace

#if LMTRAIN_HAVE_AVX2_VARIANT
#define LMTRAIN_DISPATCH(fn, ...) \
  (use_avx2.load(std::memory_order_relaxed) ? avx2::fn(__VA_ARGS__) : generic::fn(__VA_ARGS__))
#else
#define LMTRAIN_DISPATCH(fn, ...) generic::fn(__VA_ARGS__)
#endif

void use_baseline_isa(bool on) { use_avx2 = kAvx2 && !on; }

size_t attention_scratch_floats(int64_t T, int64_t D) { return generic::scratch_floats(T, D); }

void attention_forward_head(const float* q, const float* k, const float* v, int64_t ld_qkv,
                            int64_t T, int64_t D, float scale, float* P, float* y, int64_t ld_y,
                            float* scratch) {
  LMTRAIN_DISPATCH(forward_head, q, k, v, ld_qkv, T, D, scale, P, y, ld_y, scratch);
}

void attention_backward_head(const float* q, const float* k, const float* v, int64_t ld_qkv,
                             int64_t T, int64_t D, float scale, const float* P, const float* y,
                             const float* dy, int64_t ld_y, float* dq, float* dk, float* dv,
                             float* scratch) {
  LMTRAIN_DISPATCH(backward_head, q, k, v, ld_qkv, T, D, scale, P, y, dy, ld_y, dq, dk, dv,
                   scratch);
}

void softmax_xent_cols(float* logits, int64_t V, int64_t cols, int64_t ld, const int64_t* targets,
                       float* loss, float* inv_sum) {
  LMTRAIN_DISPATCH(xent_cols, logits, V, cols, ld, targets, loss, inv_sum);
}

void gelu_tanh_forward(const float* x, float* y, int64_t n) {
  LMTRAIN_DISPATCH(gelu_forward, x, y, n);
}

void gelu_tanh_backward(const float* x, const float* dy, float* dx, int64_t n) {
  LMTRAIN_DISPATCH(gelu_backward, x, dy, dx, n);
}

void adam_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamScalars& s) {
  LMTRAIN_DISPATCH(adam_step, p, g, m, v, n, s);
}

}  // namespace lmtrain::kernels
