#include "infer/generator.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <optional>

#include "core/error.h"
#include "core/log.h"

namespace lmtrain::infer {
namespace {

// (B, T) on the model's device: each row left-padded with `pad` to the longest (T).
at::Tensor ids_tensor(const std::vector<std::vector<uint32_t>>& rows, int64_t pad,
                      const model::GptImpl& model) {
  size_t T = 0;
  for (const auto& r : rows) T = std::max(T, r.size());
  std::vector<int64_t> v;
  v.reserve(rows.size() * T);
  for (const auto& r : rows) {
    v.insert(v.end(), T - r.size(), pad);
    v.insert(v.end(), r.begin(), r.end());
  }
  return torch::tensor(v, torch::kLong)
      .view({static_cast<int64_t>(rows.size()), static_cast<int64_t>(T)})
      .to(model.device());
}

// The last position's logits (B, V) on the CPU, where the seeded sampler draws.
at::Tensor last_logits(const at::Tensor& logits) {
  return logits.select(1, logits.size(1) - 1).to(torch::kCPU);
}

// Checks that `soft` has one entry per prompt with a flag per token and a value row per flag.
void check_prompt_soft(const PromptSoftTokens& soft,
                       const std::vector<std::vector<uint32_t>>& prompts,
                       const model::GptImpl& model) {
  if (soft.empty()) return;
  if (soft.slots.size() != prompts.size() || soft.values.size() != prompts.size()) {
    throw Error(
        log::format("soft tokens given for %zu prompt(s), slot values for %zu, but %zu "
                    "prompt(s)",
                    soft.slots.size(), soft.values.size(), prompts.size()));
  }
  for (size_t b = 0; b < prompts.size(); ++b) {
    const auto& v = soft.values[b];
    const auto n =
        std::count_if(soft.slots[b].begin(), soft.slots[b].end(), [](uint8_t f) { return f != 0; });
    if (soft.slots[b].size() != prompts[b].size() || !v.defined() || v.dim() != 2 ||
        v.size(0) != n || v.size(1) != model.config().n_embd) {
      throw Error(log::format(
          "prompt %zu: %zu tokens with %lld soft slot(s), but %zu slot flags and soft-token "
          "values of shape %s (expected (%lld, %lld))",
          b, prompts[b].size(), (long long)n, soft.slots[b].size(),
          (v.defined() ? c10::str(v.sizes()) : std::string("none")).c_str(), (long long)n,
          (long long)model.config().n_embd));
    }
  }
}

// The soft tokens of columns [begin, end) of the prompts left-padded to T columns: slots
// (B, end - begin) and the values that fall there, row-major. Nullopt when there are none.
std::optional<model::SoftTokens> soft_columns(const PromptSoftTokens& soft,
                                              const std::vector<std::vector<uint32_t>>& rows,
                                              size_t T, size_t begin, size_t end,
                                              const model::GptImpl& model) {
  if (soft.empty()) return std::nullopt;
  const auto B = static_cast<int64_t>(rows.size());
  auto slots = torch::zeros({B, static_cast<int64_t>(end - begin)}, torch::kBool);
  auto sl = slots.accessor<bool, 2>();
  std::vector<at::Tensor> parts;
  for (int64_t b = 0; b < B; ++b) {
    const auto& flags = soft.slots[static_cast<size_t>(b)];
    const size_t pad = T - flags.size();
    int64_t before = 0, inside = 0;  // soft tokens of this row left of the columns, and in them
    for (size_t p = 0; p < flags.size(); ++p) {
      if (!flags[p]) continue;
      const size_t col = pad + p;
      if (col < begin) {
        ++before;
      } else if (col < end) {
        sl[b][static_cast<int64_t>(col - begin)] = true;
        ++inside;
      }
    }
    if (inside > 0) parts.push_back(soft.values[static_cast<size_t>(b)].narrow(0, before, inside));
  }
  if (parts.empty()) return std::nullopt;
  return model::SoftTokens{slots.to(model.device()), torch::cat(parts).to(model.device())};
}

// Prefills a forgetting (streaming) cache with prompts of one length, in chunks that fit beside
// what the cache keeps. Returns the last chunk's logits.
at::Tensor prefill_in_chunks(model::GptImpl& model, const std::vector<std::vector<uint32_t>>& rows,
                             const KvPolicy& policy, model::KvCache& cache,
                             const PromptSoftTokens& soft) {
  const int64_t block = model.config().block_size;
  const size_t chunk =
      static_cast<size_t>(std::max<int64_t>(1, block - policy.sinks - policy.window));
  at::Tensor logits;
  for (size_t i = 0; i < rows[0].size(); i += chunk) {
    std::vector<std::vector<uint32_t>> part;
    for (const auto& r : rows) {
      part.emplace_back(r.begin() + static_cast<int64_t>(i),
                        r.begin() + static_cast<int64_t>(std::min(r.size(), i + chunk)));
    }
    const auto part_soft =
        soft_columns(soft, rows, rows[0].size(), i, std::min(rows[0].size(), i + chunk), model);
    logits =
        model.forward_cached(ids_tensor(part, 0, model), cache, part_soft ? &*part_soft : nullptr);
  }
  return logits;
}

}  // namespace

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::kEot:
      return "eot";
    case StopReason::kLength:
      return "length";
    case StopReason::kContext:
      return "context";
    case StopReason::kCancelled:
      return "cancelled";
  }
  return "?";
}

BatchGeneration generate_batch(
    model::GptImpl& model, const std::vector<std::vector<uint32_t>>& prompts,
    const std::vector<int64_t>& max_new_tokens, const SamplingOptions& opts, uint64_t seed,
    int64_t eot_id, const KvPolicy& policy, const std::function<void(size_t, uint32_t)>& on_token,
    const PromptSoftTokens& soft, const std::function<bool(size_t)>& cancelled) {
  const size_t B = prompts.size();
  BatchGeneration result;
  auto& out = result.rows;
  out.resize(B);
  if (B == 0) return result;
  size_t longest = 0, shortest = SIZE_MAX;
  for (const auto& p : prompts) {
    if (p.empty()) throw UsageError("a prompt encodes to no tokens");
    longest = std::max(longest, p.size());
    shortest = std::min(shortest, p.size());
  }
  if (longest != shortest && !policy.supports_padding()) {
    throw UsageError(log::format(
        "--kv_cache=%s cannot batch prompts of different lengths (%zu to %zu tokens): its cache "
        "keeps tokens by position in the row, which left padding shifts; use full or int8/int4, "
        "or --batch_size 1",
        policy.text.c_str(), shortest, longest));
  }
  check_prompt_soft(soft, prompts, model);
  torch::NoGradGuard no_grad;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const int64_t block = model.config().block_size;
  const int64_t steps = *std::max_element(max_new_tokens.begin(), max_new_tokens.end());
  int64_t budget = steps;
  std::unique_ptr<model::KvCache> cache;
  at::Tensor logits;
  if (policy.bounded()) {
    const auto L = static_cast<int64_t>(longest);
    if (L >= block) {
      throw UsageError(log::format("prompt of %zu tokens does not fit the model's block_size %lld",
                                   longest, (long long)block));
    }
    budget = std::min<int64_t>(steps, block - L);
    if (budget < steps) {
      // The cache and the learned positions end at block_size: no rolling window to go on with.
      log::warn(log::format(
          "max_new_tokens = %lld is more than the model's context allows: block_size %lld minus "
          "the %zu-token prompt%s leaves at most %lld new tokens, so generation stops there "
          "(--kv_cache=streaming:sinks=S,window=W generates past it)",
          (long long)steps, (long long)block, longest, B > 1 ? " (the batch's longest)" : "",
          (long long)budget));
    }
    cache = make_kv_cache(policy, model, static_cast<int64_t>(B), L + budget);
    if (longest != shortest) {
      std::vector<int64_t> pad;
      for (const auto& p : prompts) pad.push_back(L - static_cast<int64_t>(p.size()));
      cache->set_left_padding(torch::tensor(pad, torch::kLong).to(model.device()));
    }
    const auto prompt_soft = soft_columns(soft, prompts, longest, 0, longest, model);
    logits = model.forward_cached(ids_tensor(prompts, std::max<int64_t>(eot_id, 0), model), *cache,
                                  prompt_soft ? &*prompt_soft : nullptr);  // (B, L, V)
  } else {
    cache = make_kv_cache(policy, model, static_cast<int64_t>(B), block);
    logits = prefill_in_chunks(model, prompts, policy, *cache, soft);
  }
  result.peak_cache_bytes = cache->bytes();
  std::vector<bool> done(B);
  size_t running = B;
  for (size_t b = 0; b < B; ++b) {
    if (max_new_tokens[b] <= 0) {
      done[b] = true;
      --running;
    }
  }
  for (int64_t i = 0; i < budget && running > 0; ++i) {
    for (size_t b = 0; cancelled && b < B; ++b) {
      if (!done[b] && cancelled(b)) {
        out[b].stop = StopReason::kCancelled;
        done[b] = true;
        --running;
      }
    }
    if (running == 0) break;
    auto next = sample_next(last_logits(logits), opts, gen);  // (B,)
    auto ids = next.accessor<int64_t, 1>();
    for (size_t b = 0; b < B; ++b) {
      if (done[b]) continue;
      const auto id = static_cast<uint32_t>(ids[static_cast<int64_t>(b)]);
      out[b].tokens.push_back(id);
      if (on_token) on_token(b, id);
      const bool eot = eot_id >= 0 && id == static_cast<uint32_t>(eot_id);
      if (eot || static_cast<int64_t>(out[b].tokens.size()) >= max_new_tokens[b]) {
        out[b].stop = eot ? StopReason::kEot : StopReason::kLength;
        done[b] = true;
        --running;
      }
    }
    if (running > 0 && i + 1 < budget) {
      logits = model.forward_cached(next.view({static_cast<int64_t>(B), 1}).to(model.device()),
                                    *cache);  // (B, 1, V)
      result.peak_cache_bytes = std::max(result.peak_cache_bytes, cache->bytes());
    }
  }
  for (size_t b = 0; b < B; ++b) {
    if (!done[b]) out[b].stop = StopReason::kContext;
  }
  return result;
}

std::vector<uint32_t> generate(model::GptImpl& model, const std::vector<uint32_t>& prompt,
                               int64_t max_new_tokens, const SamplingOptions& opts, uint64_t seed,
                               int64_t eot_id, const std::function<void(uint32_t)>& on_token,
                               const KvPolicy& policy, const PromptSoftTokens& soft) {
  if (prompt.empty()) throw UsageError("the prompt encodes to no tokens");
  std::function<void(size_t, uint32_t)> each;
  if (on_token) each = [&](size_t, uint32_t id) { on_token(id); };
  return generate_batch(model, {prompt}, {max_new_tokens}, opts, seed, eot_id, policy, each, soft)
      .rows[0]
      .tokens;
}

std::vector<uint32_t> generate_uncached(model::GptImpl& model, const std::vector<uint32_t>& prompt,
                                        int64_t max_new_tokens, const SamplingOptions& opts,
                                        uint64_t seed, int64_t eot_id) {
  torch::NoGradGuard no_grad;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::vector<uint32_t> seq = prompt, out;
  const int64_t block = model.config().block_size;
  for (int64_t i = 0; i < max_new_tokens && static_cast<int64_t>(seq.size()) < block; ++i) {
    auto logits = model.forward(ids_tensor({seq}, 0, model));
    auto id = static_cast<uint32_t>(sample_next(last_logits(logits), opts, gen).item<int64_t>());
    out.push_back(id);
    seq.push_back(id);
    if (eot_id >= 0 && id == static_cast<uint32_t>(eot_id)) break;
  }
  return out;
}

}  // namespace lmtrain::infer
