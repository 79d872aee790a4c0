// A sliding window bounds the KV cache (KvCache::window_keep): a layer with window W keeps only
// its last W - 1 tokens between calls, with every policy. The models mix a windowed layer with a
// full one (and one has only windowed layers, whose cache bytes then stop growing), with scaled
// RoPE. Checked: the bounded cache gives the unbounded one's logits (the same policy with
// window_bound=0) and greedy tokens, and, where the policy keeps every token a window reads
// (full; H2O and StreamingLLM with room for the whole sequence), the full forward's; the bytes
// after the window are those of W - 1 tokens per windowed layer (dense storage), or repeat with
// the quantised groups' period (KIVI), below the unbounded cache's; left-padded rows keep their
// own windows while their pad slots leave the cache.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "infer/kv_cache_policy.h"
#include "kv_test_models.h"
#include "model/gpt.h"

namespace lmtrain::infer {
namespace {

// `text` with window_bound=0 added to its last part.
std::string unbounded_policy(const std::string& text) {
  const auto last = text.rfind('+');
  const bool has_params = text.find(':', last == std::string::npos ? 0 : last) != std::string::npos;
  return text + (has_params ? ",window_bound=0" : ":window_bound=0");
}

struct WindowBoundRun {
  at::Tensor logits;           // (B, T, V): a 10-token prefill, then one token at a time
  std::vector<int64_t> bytes;  // cache bytes after each call (prefill first)
};

WindowBoundRun run_window_bound(model::GptImpl& m, const at::Tensor& ids, const std::string& p) {
  auto cache = make_kv_cache(parse_kv_policy(p), m, ids.size(0), m.config().block_size);
  WindowBoundRun r;
  std::vector<at::Tensor> parts{m.forward_cached(ids.narrow(1, 0, 10), *cache)};
  r.bytes.push_back(cache->bytes());
  for (int64_t t = 10; t < ids.size(1); ++t) {
    parts.push_back(m.forward_cached(ids.narrow(1, t, 1), *cache));
    r.bytes.push_back(cache->bytes());
  }
  r.logits = torch::cat(parts, 1);
  return r;
}

double window_bound_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

// Policies over 36 tokens, windows 5 (layer 0) and none (layer 1), then 5 on both layers.
const std::vector<std::pair<std::string, bool>> kWindowBoundPolicies = {
    // (policy, whether it keeps every token a window reads over 36 tokens: exact)
    {"full", true},
    {"h2o:budget=60,recent=4", true},
    {"streaming:sinks=0,window=62", true},
    {"h2o:budget=24,recent=8", false},
    {"streaming:sinks=2,window=20", false},
    {"int8:group=2,residual=2", false},
    {"int4:group=2,residual=2", false},
    {"streaming:sinks=2,window=20+int8:group=2,residual=2", false},
};

TEST(WindowBound, BoundedCachesGiveTheUnboundedLogitsAndTokens) {
  for (const auto& windows : {std::vector<int64_t>{5, 0}, std::vector<int64_t>{5}}) {
    auto m = eval_decoder(windowed_decoder(windows, 64), 11);
    torch::NoGradGuard g;
    auto ids = torch::randint(64, {2, 36});
    const auto want = m->forward(ids);
    for (const auto& [policy, exact] : kWindowBoundPolicies) {
      SCOPED_TRACE(policy + (windows.size() == 1 ? " (every layer windowed)" : ""));
      const auto bounded = run_window_bound(*m, ids, policy);
      const auto unbounded = run_window_bound(*m, ids, unbounded_policy(policy));
      EXPECT_LE(window_bound_diff(bounded.logits, unbounded.logits), 1e-5);
      EXPECT_TRUE(torch::equal(bounded.logits.argmax(-1), unbounded.logits.argmax(-1)));
      if (exact) {
        EXPECT_LE(window_bound_diff(bounded.logits, want), 1e-5);
      }
      EXPECT_LT(bounded.bytes.back(), unbounded.bytes.back());
      if (windows.size() != 1) continue;
      // Only windowed layers: from the window on, the bytes stop growing (dense storage: those
      // of W - 1 = 4 tokens per layer; KIVI: the same after every whole group of 2 tokens).
      const auto& b = bounded.bytes;
      for (size_t t = 10; t + 2 < b.size(); ++t) EXPECT_EQ(b[t + 2], b[t]) << "step " << t;
      if (policy.find("int") == std::string::npos) {
        const int64_t per_token = 2 * 2 * 2 * 8 * 4;  // K and V, B 2, kv heads 2, D 8, fp32
        EXPECT_EQ(b.back(), 2 * 4 * per_token);
      }
    }
  }
}

TEST(WindowBound, UnboundedCachesGrowPastTheWindow) {
  auto m = eval_decoder(windowed_decoder({5}, 64), 11);
  torch::NoGradGuard g;
  const auto r = run_window_bound(*m, torch::randint(64, {2, 40}), "full:window_bound=0");
  EXPECT_EQ(r.bytes.back(), 40 * 2 * (2 * 2 * 2 * 8 * 4));
  EXPECT_THROW(parse_kv_policy("full:window_bound=2"), UsageError);
}

// Left padding: the pad slots are the oldest, so a windowed layer drops them first; the key
// mask then covers the slots the layer still holds. Both rows decode 20 tokens past a 14- and a
// 20-token prompt and give their own full forwards, with the exact and the int8 cache (the
// latter against its unbounded self).
TEST(WindowBound, LeftPaddedRowsDecodePastTheWindow) {
  auto m = eval_decoder(windowed_decoder({4, 0}, 64), 5);
  torch::NoGradGuard g;
  auto a = torch::randint(64, {1, 34}), b = torch::randint(64, {1, 40});
  auto prompts = torch::cat({torch::cat({torch::zeros({1, 6}, torch::kLong), a}, 1), b}, 0);
  for (const std::string policy : {"full", "int8:group=2,residual=2"}) {
    SCOPED_TRACE(policy);
    std::vector<at::Tensor> runs;
    for (const auto& text : {policy, unbounded_policy(policy)}) {
      auto cache = make_kv_cache(parse_kv_policy(text), *m, 2, 64);
      cache->set_left_padding(torch::tensor({6, 0}));
      std::vector<at::Tensor> parts{m->forward_cached(prompts.narrow(1, 0, 20), *cache)};
      for (int64_t t = 20; t < 40; ++t) {
        parts.push_back(m->forward_cached(prompts.narrow(1, t, 1), *cache));
      }
      runs.push_back(torch::cat(parts, 1));  // (2, 40, V)
    }
    EXPECT_LE(window_bound_diff(runs[0], runs[1]), 1e-5);
    if (policy == "full") {
      EXPECT_LE(window_bound_diff(runs[0][0].narrow(0, 6, 34), m->forward(a)[0]), 1e-5);
      EXPECT_LE(window_bound_diff(runs[0][1], m->forward(b)[0]), 1e-5);
    }
  }
}

}  // namespace
}  // namespace lmtrain::infer
