// Soft tokens: embeddings that stand where placeholder tokens stand in a decoder's input, so that
// an encoder's outputs (a time-series encoder's patch tokens, model/temporal/) enter the LM
// beside ordinary text. One decoder, one embeddings path: GptImpl's forwards take them
// (gpt.h), nothing copies the model.
//
// The slots are given as a mask over the input positions; the values fill the masked positions
// in row-major order (batch row, then position), which is the order an encoder produces them
// in when each sample's series come in prompt order.
#pragma once
#include <torch/types.h>

namespace lmtrain::model {

struct SoftTokens {
  torch::Tensor slots;   // (B, T) bool: the positions whose embedding is replaced
  torch::Tensor values;  // (n, C) with n = slots.sum(): their embeddings, in row-major order
};

// The token embeddings x (B, T, C) with x[slots] = values. Differentiable with respect to both
// (the token embeddings at the slots get no gradient). Throws lmtrain::Error naming the sizes
// when the shapes disagree; the count n is checked against slots.sum() only on the CPU (on a
// GPU that check would read back from the device, which a captured step must not do).
torch::Tensor place_soft_tokens(const torch::Tensor& x, const SoftTokens& soft);

}  // namespace lmtrain::model
