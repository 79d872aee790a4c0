// Next-token sampling from logits: temperature, top-k, top-p (nucleus); temperature 0 = greedy.
#pragma once
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

namespace lmtrain::infer {

struct SamplingOptions {
  double temperature = 1.0;  // 0: greedy (argmax)
  int64_t top_k = 0;         // 0: off
  double top_p = 1.0;        // 1: off
};

// logits: (B, V) -> token ids (B,) int64.
at::Tensor sample_next(const at::Tensor& logits, const SamplingOptions& opts, at::Generator& gen);

}  // namespace lmtrain::infer
