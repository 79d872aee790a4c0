// The LM head and its loss in one autograd function for CPU fp32:
//   loss = mean_n cross_entropy(x_n W^T, target_n)
// libtorch's path (linear -> log_softmax -> nll_loss) makes four full passes over the (N, V)
// logits in backward alone (a zero fill, the nll scatter, exp again, the softmax gradient). Here
// the forward overwrites the logits with exp(logit - max) in one pass, and the backward never
// touches them elementwise. The logits are held transposed, E^T (V, N), the layout in which
// MKL runs both passes' large GEMMs fastest. With P = diag(1/sum) E and dlogits =
// (P - onehot) g/N,
//   dx = g/N (diag(1/sum) (E W) - W[target])        (N, C)
//   dW = g/N (E^T (diag(1/sum) x) - onehot^T x)      (V, C)
// so the row scaling and the one-hot term act on (N, C) and (V, C) operands, not on (N, V).
#pragma once
#include <ATen/core/Tensor.h>

namespace lmtrain::model {

// x: (N, C), weight: (V, C), targets: (N,) int64 in [0, V). Returns the mean loss (scalar).
// Differentiable with respect to x and weight.
at::Tensor fused_linear_cross_entropy(const at::Tensor& x, const at::Tensor& weight,
                                      const at::Tensor& targets);

// Whether fused_linear_cross_entropy applies: CPU fp32 operands (x of any rank >= 2, to be
// flattened to (N, C) by the caller), kernels switched on.
bool fused_cross_entropy_supported(const at::Tensor& x, const at::Tensor& weight);

}  // namespace lmtrain::model
