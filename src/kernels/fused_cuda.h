// Launchers of the fused GPU kernels (kernels/cuda/fused_*.cu), compiled only in builds
// with CUDA (LMTRAIN_CUDA_KERNELS). Each mirrors its CPU reference in kernels/fused_reference.h:
// same arguments, same math (kernels/fused_math.h), on device pointers and a CUDA stream.
//
// No torch and no CUDA headers: callers (model/fused_*.cpp) own the tensors, pass their data
// pointers with each one's element type, and give the stream as a void* (cudaStream_t).
// Weights (w, b, the QK-norm weights) and the saved statistics are fp32.
#pragma once
#include <cstdint>

#include "kernels/fused_math.h"

namespace lmtrain::kernels {

enum class ElementType { kFloat32, kBFloat16 };

// True in a build that compiled the kernels (nvcc and a CUDA libtorch).
bool fused_cuda_kernels_built();

// Residual add + LayerNorm / RMSNorm. h has x's type; dx has x's type; dy has y's type.
struct AddNormTypes {
  ElementType x, delta, y;
};
void add_norm_forward_cuda(const void* x, const void* delta, const float* w, const float* b,
                           int64_t N, int64_t C, float eps, bool rms, AddNormTypes types, void* h,
                           void* y, float* mean, float* rstd, void* stream);
// Writes dx; dw_partial and db_partial (add_norm_partial_rows(N), C) hold column sums of row
// chunks, in a fixed order (no atomics: the result is the same bits on every run), for the
// caller to sum over the first dim. db_partial may be null (no bias).
int64_t add_norm_partial_rows(int64_t N);
void add_norm_backward_cuda(const void* h, const float* w, const float* mean, const float* rstd,
                            const void* dy, const void* dh, int64_t N, int64_t C, bool rms,
                            AddNormTypes types, void* dx, float* dw_partial, float* db_partial,
                            void* stream);

// SwiGLU over rows of [gate (H); up (H)]: h (N, 2H) -> y (N, H), one element type.
void swiglu_forward_cuda(const void* h, int64_t N, int64_t H, ElementType type, void* y,
                         void* stream);
void swiglu_backward_cuda(const void* h, const void* dy, int64_t N, int64_t H, ElementType type,
                          void* dh, void* stream);

// Packed QKV -> q, k, v with QK-norm and RoPE (see qkv_split_forward_reference). D must be even.
// q_w/k_w null: no QK-norm; cos/sin (T, D/2) fp32 null: no rotation. rstd (B, T, H + K) fp32.
void qkv_split_forward_cuda(const void* packed, const float* q_w, const float* k_w,
                            const float* cos, const float* sin, const QkvShape& s, float eps,
                            ElementType type, void* q, void* k, void* v, float* rstd, void* stream);
// dpacked gets every row; with QK-norm, dw_partial (qkv_norm_partial_rows(B * T), 2, D) holds
// the column sums of row chunks for the query (index 0) and key (1) weights.
int64_t qkv_norm_partial_rows(int64_t rows);
void qkv_split_backward_cuda(const void* packed, const float* q_w, const float* k_w,
                             const float* cos, const float* sin, const QkvShape& s,
                             const float* rstd, const void* dq, const void* dk, const void* dv,
                             ElementType type, void* dpacked, float* dw_partial, void* stream);

// The classifier over rows of V logits (see classifier_reference): loss (n) fp32, and with
// write_grad the gradient in place of the logits (their type). targets (n) int64 and row_scale
// (n) fp32 on the device. `vectorized`: the rows move in 16-byte loads and stores (the same
// math; the row sums gather in another order).
void classifier_cuda(void* logits, ElementType type, const int64_t* targets, const float* row_scale,
                     int64_t n, int64_t V, float cap, bool write_grad, float* loss, bool vectorized,
                     void* stream);

}  // namespace lmtrain::kernels
