// The LM head and its loss, chunk by chunk of rows, on any device (the GPU's path; the CPU's
// fp32 path has its own kernel, fused_cross_entropy.h):
//   loss = mean over rows with a target of cross_entropy(x_n W^T, target_n)
// libtorch's path holds the whole (N, V) logits several times over: the compute-dtype logits,
// their fp32 copy, the fp32 log-softmax, and in backward its gradient and the cast back. For
// Qwen3's 151,936-token vocabulary at 16,384 tokens a step that is tens of GB. Here each chunk
// of rows computes its logits, its loss and, when gradients are wanted, its dlogits =
// softmax - onehot at once, turns them into its share of dx (rows, C) and dW (V, C), and frees
// them: peak extra memory is one chunk's (rows, V), and backward only scales the stored
// gradients by the incoming one. The GEMMs run in the autocast dtype where autocast is on (as
// the unfused head would), the softmax in fp32.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace lmtrain::model {

// x: (N, C), weight: (V, C), targets: (N,) int64 in [0, V) or kIgnoreIndex (-100, no loss).
// Returns the mean loss over the rows with a target (a scalar, fp32; 0 when none has one).
// Differentiable with respect to x and weight. `softcap` > 0 bends the logits z into
// softcap * tanh(z / softcap) first (in fp32), as GptConfig::logit_softcap does. `chunk_rows`
// <= 0 picks rows so that one chunk's fp32 logits take about 256 MiB.
at::Tensor chunked_linear_cross_entropy(const at::Tensor& x, const at::Tensor& weight,
                                        const at::Tensor& targets, double softcap = 0,
                                        int64_t chunk_rows = 0);

}  // namespace lmtrain::model
