// Next-token sampling from logits: temperature, top-k, top-p (nucleus); temperature 0 = greedy.
#pragma once
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <utility>
#include <vector>

namespace lmtrain::infer {

struct SamplingOptions {
  double temperature = 1.0;  // 0: greedy (argmax)
  int64_t top_k = 0;         // 0: off
  double top_p = 1.0;        // 1: off
  // > 0: ids at or past it are never drawn. The model's vocabulary may be padded past the
  // tokenizer's (50304 for GPT-2's 50257): a barely trained model gives those rows mass, and
  // an id the tokenizer cannot decode must not come out.
  int64_t vocab_limit = 0;
  // (token id, bias) added to every row's logits before anything else, greedy included: OpenAI's
  // logit_bias (-100 bans a token). Ids below the vocabulary, ascending.
  std::vector<std::pair<int64_t, float>> logit_bias;
};

// logits: (B, V) -> token ids (B,) int64.
at::Tensor sample_next(const at::Tensor& logits, const SamplingOptions& opts, at::Generator& gen);

}  // namespace lmtrain::infer
