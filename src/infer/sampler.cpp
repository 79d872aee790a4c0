#include "infer/sampler.h"

#include <limits>

namespace lmtrain::infer {

at::Tensor sample_next(const at::Tensor& logits_in, const SamplingOptions& opts,
                       at::Generator& gen) {
  torch::NoGradGuard no_grad;
  auto logits = logits_in.to(torch::kFloat32);
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const int64_t V = logits.size(-1);
  if (opts.vocab_limit > 0 && opts.vocab_limit < V) {
    if (logits.is_same(logits_in)) logits = logits.clone();
    logits.narrow(-1, opts.vocab_limit, V - opts.vocab_limit).fill_(neg_inf);
  }
  if (!opts.logit_bias.empty()) {
    if (logits.is_same(logits_in)) logits = logits.clone();
    for (const auto& [id, bias] : opts.logit_bias) {
      if (id < V) logits.select(-1, id).add_(bias);
    }
  }
  if (opts.temperature <= 0) return logits.argmax(-1);
  logits = logits / opts.temperature;
  if (opts.top_k > 0 && opts.top_k < logits.size(-1)) {
    auto kth = std::get<0>(logits.topk(opts.top_k, -1)).narrow(-1, opts.top_k - 1, 1);  // (B, 1)
    logits = logits.masked_fill(logits < kth, neg_inf);
  }
  if (opts.top_p < 1.0) {
    auto [sorted, idx] = logits.sort(-1, /*descending=*/true);
    auto cum = sorted.softmax(-1).cumsum(-1);
    // Drop tokens whose preceding mass already exceeds top_p (always keeps the best one).
    auto drop = (cum - sorted.softmax(-1)) > opts.top_p;
    sorted = sorted.masked_fill(drop, neg_inf);
    logits = torch::full_like(logits, neg_inf).scatter(-1, idx, sorted);
  }
  auto probs = logits.softmax(-1);
  return at::multinomial(probs, 1, /*replacement=*/false, gen).squeeze(-1);
}

}  // namespace lmtrain::infer
