// Composed KV policies (SELECTION+STORAGE): StreamingLLM over KIVI-quantised storage stays
// within int8's error of the full cache while its window covers the sequence, keeps S + W tokens
// past block_size in quantised bytes; the store drops tokens without requantising; nonsensical
// compositions are errors naming the text.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/error.h"
#include "infer/dense_kv_store.h"
#include "infer/generator.h"
#include "infer/kv_cache_policy.h"
#include "infer/quantized_kv_store.h"
#include "kv_test_models.h"
#include "model/gpt.h"

namespace lmtrain::infer {
namespace {

TEST(KvCompose, StreamingOverInt8WithAWideWindowIsWithinInt8OfFull) {
  for (const bool rope : {false, true}) {
    auto m = eval_decoder(decoder_with(rope), 11);
    torch::NoGradGuard g;
    auto ids = torch::randint(64, {2, 24});
    auto full = m->make_cache(2, 32);
    auto want = token_by_token(*m, ids, *full);
    // Groups of 8, no full-precision residual: every complete group is quantised at once.
    auto int8 = make_kv_cache(parse_kv_policy("int8:group=8,residual=0"), *m, 2, 32);
    auto plain = token_by_token(*m, ids, *int8);
    auto composed = make_kv_cache(
        parse_kv_policy("streaming:sinks=4,window=24+int8:group=8,residual=0"), *m, 2, 32);
    auto got = token_by_token(*m, ids, *composed);
    const double scale = want.abs().max().item<double>();
    const double plain_err = (plain - want).abs().max().item<double>();
    const double err = (got - want).abs().max().item<double>();
    EXPECT_GT(err, 0.0) << "the quantised path was not exercised";
    // The same tolerance as plain int8's test; keys are quantised before rotation here, after
    // it in plain int8, so the two differ by about one int8 error.
    EXPECT_LT(err, 1e-2 * scale + 1e-4) << "rope " << rope;
    EXPECT_LT((got - plain).abs().max().item<double>(), 2e-2 * scale + 1e-4);
    EXPECT_LT(plain_err, 1e-2 * scale + 1e-4);
    EXPECT_EQ(composed->held(), 24);
    EXPECT_LT(composed->bytes(), full->bytes() * 0.4);
  }
}

TEST(KvCompose, StreamingOverInt4KeepsSinksPlusWindowPastBlockSizeInQuantisedBytes) {
  for (const bool rope : {false, true}) {
    auto m = eval_decoder(decoder_with(rope), 12);
    torch::NoGradGuard g;
    const int64_t block = m->config().block_size;
    int64_t int8_bytes = 0;
    for (const char* text : {"streaming:sinks=2,window=14+int8:group=4,residual=4",
                             "streaming:sinks=2,window=14+int4:group=4,residual=4"}) {
      auto policy = parse_kv_policy(text);
      auto dense = make_kv_cache(parse_kv_policy("streaming:sinks=2,window=14"), *m, 1, 32);
      auto cache = make_kv_cache(policy, *m, 1, 32);
      for (int64_t t = 0; t < 3 * block; ++t) {
        auto id = torch::full({1, 1}, (t * 7) % 64, torch::kLong);
        auto a = m->forward_cached(id, *cache);
        auto b = m->forward_cached(id, *dense);
        EXPECT_LE(cache->held(), 16);
        EXPECT_TRUE(a.isfinite().all().item<bool>());
        (void)b;
      }
      EXPECT_EQ(cache->held(), 16);
      EXPECT_EQ(dense->held(), 16);
      // fp32 dense: 4 bytes per element. int8: 1 per element plus fp16 scale and zero per
      // channel (keys) or per token and 4 channels (values), and a 4-7 token fp32 residual:
      // about 0.6 of dense at these tiny sizes; int4 less again.
      const double ratio =
          static_cast<double>(cache->bytes()) / static_cast<double>(dense->bytes());
      if (policy.quant->bits == 8) {
        EXPECT_LT(ratio, 0.75) << text;
        int8_bytes = cache->bytes();
      } else {
        EXPECT_LT(cache->bytes(), int8_bytes) << text;
      }
    }
    // Generation runs 4x past block_size with the composed cache.
    SamplingOptions greedy;
    greedy.temperature = 0;
    auto out = generate(*m, {1, 2, 3}, 4 * 32, greedy, 0, -1, {},
                        parse_kv_policy("streaming:sinks=2,window=10+int8:group=4,residual=2"));
    EXPECT_EQ(out.size(), 4u * 32);
  }
}

// Dropping tokens from quantised groups keeps the survivors' dequantised values exactly.
TEST(KvCompose, QuantisedStoreDropsTokensWithoutRequantising) {
  torch::manual_seed(13);
  QuantizedKvStore store({8, 4, 2});
  auto k = torch::randn({1, 2, 14, 8}), v = torch::randn({1, 2, 14, 8});
  store.append(k, v);
  store.settle();  // groups [0,4), [4,8), [8,12); residual [12,14)
  EXPECT_EQ(store.size(), 14);
  auto [k0, v0] = store.read(at::kFloat);
  const std::vector<TokenRange> keep = {{0, 2}, {5, 13}};
  store.keep(keep);
  EXPECT_EQ(store.size(), 10);
  auto [k1, v1] = store.read(at::kFloat);
  EXPECT_TRUE(torch::equal(k1, keep_token_ranges(k0, keep)));
  EXPECT_TRUE(torch::equal(v1, keep_token_ranges(v0, keep)));
  // Residual tokens stay exact.
  EXPECT_TRUE(torch::equal(k1.narrow(2, 9, 1), k.narrow(2, 12, 1)));
}

TEST(KvCompose, CompositionsAreParsedAndNonsenseIsNamed) {
  auto p = parse_kv_policy("streaming:sinks=4,window=252+int8:group=32");
  EXPECT_EQ(p.select, KvPolicy::Select::kStreaming);
  EXPECT_EQ(p.sinks, 4);
  EXPECT_EQ(p.window, 252);
  ASSERT_TRUE(p.quant);
  EXPECT_EQ(p.quant->bits, 8);
  EXPECT_EQ(p.quant->group, 32);
  EXPECT_FALSE(p.bounded());
  auto q = parse_kv_policy("int4+streaming:window=8");  // either order
  EXPECT_EQ(q.select, KvPolicy::Select::kStreaming);
  EXPECT_EQ(q.quant->bits, 4);
  for (const char* bad : {"full+int8", "int8+full", "int8+int4", "streaming:window=8+h2o:budget=8",
                          "int8+int8", "streaming:window=8+streaming:window=9", "h2o:budget=8+int8",
                          "streaming:window=8+int8:group=1", "streaming:window=8+", "+int8",
                          "streaming:window=8+int8+int4", "streaming:window=8+int9"}) {
    expect_rejected(bad);
  }
  // A group that does not split head_dim (8) into even int4 groups fails when the cache is made.
  model::Gpt m(decoder_with(false));
  EXPECT_THROW(make_kv_cache(parse_kv_policy("streaming:window=8+int4:group=3"), *m, 1, 32),
               UsageError);
}

}  // namespace
}  // namespace lmtrain::infer
