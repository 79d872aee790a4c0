#include "infer/generator.h"

#include <ATen/CPUGeneratorImpl.h>

#include "core/error.h"
#include "core/log.h"

namespace lmtrain::infer {
namespace {

// (1, T) on the model's device.
at::Tensor ids_tensor(const std::vector<uint32_t>& ids, const model::GptImpl& model) {
  std::vector<int64_t> v(ids.begin(), ids.end());
  return torch::tensor(v, torch::kLong).view({1, -1}).to(model.device());
}

// The last position's logits (1, V) on the CPU, where the seeded sampler draws.
at::Tensor last_logits(const at::Tensor& logits) {
  return logits.select(1, logits.size(1) - 1).to(torch::kCPU);
}

}  // namespace

std::vector<uint32_t> generate(model::GptImpl& model, const std::vector<uint32_t>& prompt,
                               int64_t max_new_tokens, const SamplingOptions& opts, uint64_t seed,
                               int64_t eot_id, const std::function<void(uint32_t)>& on_token,
                               const KvPolicy& policy) {
  if (prompt.empty()) throw UsageError("the prompt encodes to no tokens");
  torch::NoGradGuard no_grad;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const int64_t block = model.config().block_size;
  int64_t budget = max_new_tokens;
  std::unique_ptr<model::KvCache> cache;
  at::Tensor logits;
  if (policy.bounded()) {
    if (static_cast<int64_t>(prompt.size()) >= block) {
      throw UsageError(log::format("prompt of %zu tokens does not fit the model's block_size %lld",
                                   prompt.size(), (long long)block));
    }
    budget = std::min<int64_t>(max_new_tokens, block - prompt.size());
    if (budget < max_new_tokens) {
      // The cache and the learned positions end at block_size: no rolling window to go on with.
      log::warn(log::format(
          "max_new_tokens = %lld is more than the model's context allows: block_size %lld minus "
          "the %zu-token prompt leaves at most %lld new tokens, so generation stops there "
          "(--kv_cache=streaming:sinks=S,window=W generates past it)",
          (long long)max_new_tokens, (long long)block, prompt.size(), (long long)budget));
    }
    cache = make_kv_cache(policy, model, 1, prompt.size() + budget);
    logits = model.forward_cached(ids_tensor(prompt, model), *cache);  // (1, T, V)
  } else {
    // A forgetting cache: the prompt goes in chunks that fit beside what the cache keeps.
    cache = make_kv_cache(policy, model, 1, block);
    const int64_t chunk = std::max<int64_t>(1, block - policy.sinks - policy.window);
    for (size_t i = 0; i < prompt.size(); i += static_cast<size_t>(chunk)) {
      const std::vector<uint32_t> part(
          prompt.begin() + static_cast<int64_t>(i),
          prompt.begin() + static_cast<int64_t>(std::min(prompt.size(), i + chunk)));
      logits = model.forward_cached(ids_tensor(part, model), *cache);
    }
  }
  std::vector<uint32_t> out;
  for (int64_t i = 0; i < budget; ++i) {
    auto next = sample_next(last_logits(logits), opts, gen);  // (1,)
    const auto id = static_cast<uint32_t>(next.item<int64_t>());
    out.push_back(id);
    if (on_token) on_token(id);
    if (eot_id >= 0 && id == static_cast<uint32_t>(eot_id)) break;
    if (i + 1 < budget) logits = model.forward_cached(ids_tensor({id}, model), *cache);
  }
  return out;
}

std::vector<uint32_t> generate_uncached(model::GptImpl& model, const std::vector<uint32_t>& prompt,
                                        int64_t max_new_tokens, const SamplingOptions& opts,
                                        uint64_t seed, int64_t eot_id) {
  torch::NoGradGuard no_grad;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::vector<uint32_t> seq = prompt, out;
  const int64_t block = model.config().block_size;
  for (int64_t i = 0; i < max_new_tokens && static_cast<int64_t>(seq.size()) < block; ++i) {
    auto logits = model.forward(ids_tensor(seq, model));
    auto id = static_cast<uint32_t>(sample_next(last_logits(logits), opts, gen).item<int64_t>());
    out.push_back(id);
    seq.push_back(id);
    if (eot_id >= 0 && id == static_cast<uint32_t>(eot_id)) break;
  }
  return out;
}

}  // namespace lmtrain::infer
