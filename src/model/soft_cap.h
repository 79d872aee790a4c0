// Logit soft-capping (GptConfig::logit_softcap, nanochat's, Gemma's): logits = cap tanh(raw / cap)
// bounds them to (-cap, cap). For the chunked losses, which compute their own gradients outside
// autograd (chunked_cross_entropy, distill_loss); the model's head applies it with autograd.
#pragma once
#include <ATen/ATen.h>

namespace lmtrain::model {

// cap tanh(raw / cap) in place on `raw` (a fresh tensor outside autograd), or `raw` itself
// when cap <= 0.
inline at::Tensor soft_cap_(at::Tensor raw, double cap) {
  if (cap > 0) raw.div_(cap).tanh_().mul_(cap);
  return raw;
}

// The chain rule through it, given the capped logits: grad *= 1 - (capped / cap)^2 (the
// derivative of cap tanh(raw / cap)); nothing when cap <= 0.
inline void soft_cap_backward_(at::Tensor& grad, const at::Tensor& capped, double cap) {
  if (cap > 0) grad.mul_(1.0 - (capped / cap).square());
}

}  // namespace lmtrain::model
