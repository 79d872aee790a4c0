// The LM head's cross-entropy and its gradient as one kernel over a chunk's logits
// (kernels: classifier), for model/chunked_cross_entropy.cpp: llm.c's fused classifier.
//
// libtorch's path over a chunk's (n, V) logits: log_softmax into fp32, gather, exp_,
// scatter_add_, the soft cap's backward and the cast back to the GEMM dtype (about ten passes,
// three (n, V) fp32 tensors). The kernel reads the logits twice and overwrites them with the
// gradient in their own dtype, already scaled by each row's share of the mean, so the two
// GEMMs that follow need no (n, C) rescaling either.
#pragma once
#include <ATen/core/Tensor.h>

namespace lmtrain::model {

// Whether the kernel runs for logits on this device (`on_cuda`) in this dtype: switched on
// (kernels/kernel_switch.h) and fp32 or bf16.
bool classifier_fused(bool on_cuda, at::ScalarType logits_dtype);

// logits: (n, V) contiguous, fp32 or bf16; targets: (n,) int64 in [0, V); row_scale: (n,)
// fp32, each row's factor in the caller's loss (0 for a row without a target). Returns
// -log softmax(z)[target] (n,) fp32, unscaled, with z the logits under the soft cap `cap` (none
// when <= 0). With `write_grad` the logits become d(sum_r row_scale_r loss_r) / dlogits.
// On a GPU the CUDA kernel, on a CPU its reference (tests).
at::Tensor classifier_(at::Tensor& logits, const at::Tensor& targets, const at::Tensor& row_scale,
                       double cap, bool write_grad);

}  // namespace lmtrain::model
