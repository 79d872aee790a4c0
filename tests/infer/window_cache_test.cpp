// Generation with sliding windows equals the full forward with the window mask, with every KV
// cache policy that keeps what a window reads: the exact cache (a chunked prefill, then single
// tokens; a left-padded batch), H2O with a budget that evicts nothing, StreamingLLM with no
// sinks and a recent window of W - 1 tokens (which bounds the cache to the window and still
// gives the windowed model's logits, past block_size too), and the KIVI int8 cache, which
// stays close. The models mix windowed and full layers and use scaled RoPE (llama3).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "infer/h2o_kv_cache.h"
#include "infer/quantized_kv_cache.h"
#include "infer/streaming_kv_cache.h"
#include "kv_test_models.h"
#include "model/gpt.h"

namespace lmtrain::infer {
namespace {

double max_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

TEST(WindowCache, FullCacheAndH2oEqualTheWindowedForward) {
  auto m = eval_decoder(windowed_decoder({5, 0}), 3);
  torch::NoGradGuard g;
  auto ids = torch::randint(64, {2, 30});
  const auto want = m->forward(ids);  // (B, T, V), the window as a mask
  // Exact cache: a 10-token prefill (queries 0..9 over keys 0..9), then one token at a time.
  auto full = m->make_cache(2, 48);
  auto prefill = m->forward_cached(ids.narrow(1, 0, 10), *full);
  auto rest = token_by_token(*m, ids.narrow(1, 10, 20), *full);
  EXPECT_LE(max_diff(torch::cat({prefill, rest}, 1), want), 1e-5);
  // H2O computes the weights explicitly; a budget as long as the sequence evicts nothing.
  H2oKvCache h2o(2, 48, 48, 4, m->rope_spec());
  EXPECT_LE(max_diff(token_by_token(*m, ids, h2o), want), 1e-5);
  // Without the window the logits past it differ: the caches did apply it.
  auto plain_cfg = m->config();
  plain_cfg.windows.clear();
  auto plain = eval_decoder(plain_cfg, 3);
  EXPECT_GT(max_diff(plain->forward(ids).narrow(1, 5, 25), want.narrow(1, 5, 25)), 1e-3);
}

TEST(WindowCache, LeftPaddedBatchSeesEachRowsOwnWindow) {
  auto m = eval_decoder(windowed_decoder({4}), 5);
  torch::NoGradGuard g;
  auto a = torch::randint(64, {1, 14}), b = torch::randint(64, {1, 20});
  auto batch = torch::cat({torch::cat({torch::zeros({1, 6}, torch::kLong), a}, 1), b}, 0);
  auto cache = m->make_cache(2, 48);
  cache->set_left_padding(torch::tensor({6, 0}));
  auto logits = m->forward_cached(batch, *cache);  // (2, 20, V)
  EXPECT_LE(max_diff(logits[0].narrow(0, 6, 14), m->forward(a)[0]), 1e-5);
  EXPECT_LE(max_diff(logits[1], m->forward(b)[0]), 1e-5);
}

TEST(WindowCache, StreamingWithTheWindowBoundsTheCacheAndKeepsTheLogits) {
  const int64_t W = 6;
  auto m = eval_decoder(windowed_decoder({W}, 32), 7);
  torch::NoGradGuard g;
  auto ids = torch::randint(64, {1, 30});
  const auto want = m->forward(ids);
  // Every layer reads only the last W keys: no sinks and W - 1 kept tokens hold all of them.
  StreamingKvCache stream(2, 0, W - 1, m->rope_spec());
  EXPECT_LE(max_diff(token_by_token(*m, ids, stream), want), 1e-4);
  EXPECT_EQ(stream.held(), W - 1);
  // ...and it runs past block_size (32) with the same per-token computation.
  auto longer = torch::randint(64, {1, 80});
  auto tail = token_by_token(*m, longer, stream);
  EXPECT_EQ(tail.size(1), 80);
  EXPECT_TRUE(torch::isfinite(tail).all().item<bool>());
}

TEST(WindowCache, Int8CacheStaysCloseToTheWindowedForward) {
  auto m = eval_decoder(windowed_decoder({5, 0}), 9);
  torch::NoGradGuard g;
  auto ids = torch::randint(64, {2, 24});
  const auto want = m->forward(ids);
  for (const auto read : {QuantizedKvCache::Read::kCodes, QuantizedKvCache::Read::kDequantised}) {
    QuantizedKvCache int8(2, 48, m->rope_spec(), {8, 8, 0});
    int8.set_read(read);
    const double err = max_diff(token_by_token(*m, ids, int8), want);
    EXPECT_LT(err, 1e-2 * want.abs().max().item<double>() + 1e-4);
    EXPECT_GT(err, 0.0) << "the quantised path was not exercised";
  }
}

}  // namespace
}  // namespace lmtrain::infer
