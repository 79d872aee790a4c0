// KV cache policies: KIVI quantisation round-trips within its step size and int8 decoding stays
// close to the full cache; StreamingLLM with a window covering the sequence equals the full
// cache, keeps S + W tokens and runs 4x past block_size; policy texts are validated.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/error.h"
#include "infer/generator.h"
#include "infer/h2o_kv_cache.h"
#include "infer/kv_cache_policy.h"
#include "infer/quantized_kv_cache.h"
#include "infer/streaming_kv_cache.h"
#include "kv_test_models.h"
#include "model/gpt.h"

namespace lmtrain::infer {
namespace {

TEST(KvQuantize, RoundTripIsWithinHalfAStep) {
  torch::manual_seed(0);
  auto x = torch::randn({2, 3, 8, 16}) * 3;
  for (int bits : {8, 4}) {
    for (int64_t dim : {2, 3}) {
      auto q = quantize(x, bits, dim);
      auto back = dequantize(q, at::kFloat);
      ASSERT_EQ(back.sizes(), x.sizes());
      // Half a step, plus what storing scale and zero in fp16 costs.
      auto bound = q.scale.to(at::kFloat) * 0.5 * 1.01 + 2e-3 * x.abs().max();
      EXPECT_TRUE((x - back).abs().le(bound).all().item<bool>()) << "bits " << bits;
      EXPECT_EQ(q.codes.scalar_type(), at::kByte);
      EXPECT_EQ(q.codes.size(-1), bits == 4 ? 8 : 16);  // int4: two codes per byte
    }
  }
}

TEST(KvQuantized, Int8StaysCloseToFullAndStoresLess) {
  for (const bool rope : {false, true}) {
    auto m = eval_decoder(decoder_with(rope), 1);
    torch::NoGradGuard g;
    auto ids = torch::randint(64, {2, 24});
    auto full = m->make_cache(2, 32);
    auto want = token_by_token(*m, ids, *full);
    // No full-precision residual: every group of 8 tokens is quantised as soon as it is complete.
    QuantizedKvCache int8(2, 32, m->rope_spec(), {8, 8, 0});
    auto got = token_by_token(*m, ids, int8);
    const double err = (got - want).abs().max().item<double>();
    EXPECT_LT(err, 1e-2 * want.abs().max().item<double>() + 1e-4) << "rope " << rope;
    EXPECT_GT(err, 0.0) << "the quantised path was not exercised";
    // 1 byte per element plus fp16 scale and zero per 8: 1.5 bytes against fp32's 4.
    EXPECT_EQ(int8.held(), 24);
    EXPECT_LT(int8.bytes(), full->bytes() * 0.4);
  }
}

// The attention that reads the codes (quantized_attention.h) equals dequantising every group
// and attending over the result: int8 and int4, GPT-2 and RoPE + GQA, a chunked prefill (T > 1,
// causal among the new tokens) then single-token steps crossing group boundaries, and a
// left-padded batch.
TEST(KvQuantized, AttentionOverTheCodesEqualsTheDequantisedRead) {
  for (const bool rope : {false, true}) {
    for (const int bits : {8, 4}) {
      SCOPED_TRACE(std::string(rope ? "rope" : "gpt2") + " int" + std::to_string(bits));
      auto m = eval_decoder(decoder_with(rope), 2);
      torch::NoGradGuard g;
      auto ids = torch::randint(64, {3, 26});
      auto run = [&](bool fused, bool padded) {
        QuantizedKvCache cache(2, 32, m->rope_spec(), {bits, 8, 4});
        cache.set_read(fused ? QuantizedKvCache::Read::kCodes
                             : QuantizedKvCache::Read::kDequantised);
        if (padded) cache.set_left_padding(torch::tensor({0, 3, 1}));
        std::vector<at::Tensor> out{m->forward_cached(ids.narrow(1, 0, 10), cache)};
        for (int64_t t = 10; t < ids.size(1); ++t) {
          out.push_back(m->forward_cached(ids.narrow(1, t, 1), cache));
        }
        EXPECT_GT(cache.bytes(), 0);
        return at::cat(out, 1);
      };
      for (const bool padded : {false, true}) {
        auto fused = run(true, padded), read = run(false, padded);
        EXPECT_LT((fused - read).abs().max().item<double>(), 1e-4) << "padded " << padded;
      }
    }
  }
}

TEST(KvStreaming, AWindowCoveringTheSequenceEqualsTheFullCache) {
  for (const bool rope : {false, true}) {
    auto m = eval_decoder(decoder_with(rope), 2);
    torch::NoGradGuard g;
    auto ids = torch::randint(64, {2, 20});
    auto full = m->make_cache(2, 32);
    StreamingKvCache stream(2, 4, 20, m->rope_spec());
    auto want = token_by_token(*m, ids, *full);
    auto got = token_by_token(*m, ids, stream);
    EXPECT_TRUE(torch::allclose(got, want, 1e-5, 1e-6)) << (got - want).abs().max();
  }
}

TEST(KvStreaming, KeepsSinksPlusWindowAndGeneratesFourTimesPastBlockSize) {
  for (const bool rope : {false, true}) {
    auto m = eval_decoder(decoder_with(rope), 3);
    auto policy = parse_kv_policy("streaming:sinks=2,window=10");
    SamplingOptions greedy;
    greedy.temperature = 0;
    const int64_t n = 4 * 32;
    auto out = generate(*m, {1, 2, 3}, n, greedy, 0, -1, {}, policy);
    EXPECT_EQ(static_cast<int64_t>(out.size()), n) << "rope " << rope;
    auto cache = make_kv_cache(policy, *m, 1, 32);
    torch::NoGradGuard g;
    for (int64_t t = 0; t < 3 * 32; ++t) {
      m->forward_cached(torch::full({1, 1}, t % 64, torch::kLong), *cache);
      EXPECT_LE(cache->held(), 12);
    }
    EXPECT_EQ(cache->held(), 12);
    EXPECT_EQ(cache->bytes(), 2 * 2 * 12 * m->config().kv_heads() * m->config().head_dim() * 4);
  }
}

TEST(KvH2o, ABudgetCoveringTheSequenceEqualsTheFullCache) {
  for (const bool rope : {false, true}) {
    auto m = eval_decoder(decoder_with(rope), 4);
    torch::NoGradGuard g;
    auto ids = torch::randint(64, {2, 20});
    auto full = m->make_cache(2, 32);
    auto h2o = make_kv_cache(parse_kv_policy("h2o:budget=20,recent=4"), *m, 2, 32);
    auto want = token_by_token(*m, ids, *full);
    auto got = token_by_token(*m, ids, *h2o);
    EXPECT_TRUE(torch::allclose(got, want, 1e-5, 1e-6)) << (got - want).abs().max();
    // A smaller budget holds exactly B tokens and changes the result.
    auto small = make_kv_cache(parse_kv_policy("h2o:budget=8,recent=2"), *m, 2, 32);
    auto other = token_by_token(*m, ids, *small);
    EXPECT_EQ(small->held(), 8);
    EXPECT_FALSE(torch::allclose(other, want, 1e-5, 1e-6));
  }
}

// Hand-made attention: the recent R stay, then the heaviest older tokens, kept in position order.
TEST(KvH2o, EvictsTheLightestOlderTokensAndKeepsTheRecentOnes) {
  H2oKvCache cache(1, 64, /*budget=*/4, /*recent=*/2, {});
  auto kv = torch::randn({1, 1, 6, 2});
  cache.update(0, kv, kv);
  // Two query heads share the kv head; their weights add up. Accumulated per token:
  // [5, 0.1, 3, 0.2, 0, 0] -> keep older tokens 0 and 2, and the recent 4, 5.
  auto w = torch::zeros({1, 2, 6, 6});
  w[0][0][5][0] = 4;
  w[0][1][4][0] = 1;
  w[0][0][3][2] = 3;
  w[0][1][5][1] = 0.1;
  w[0][0][5][3] = 0.2;
  cache.observe(0, w);
  cache.advance(6);
  EXPECT_TRUE(torch::equal(cache.positions(0), torch::tensor({0, 2, 4, 5}).view({1, 1, 4})));
  EXPECT_TRUE(
      torch::allclose(cache.scores(0), torch::tensor({5.f, 3.f, 0.f, 0.f}).view({1, 1, 4})));
  // One more token whose attention goes to position 4: position 2 is now the lightest older one.
  cache.update(0, torch::randn({1, 1, 1, 2}), torch::randn({1, 1, 1, 2}));
  auto w2 = torch::zeros({1, 2, 1, 5});
  w2[0][0][0][2] = 9;  // position 4 (index 2) becomes heavy
  cache.observe(0, w2);
  cache.advance(1);
  EXPECT_TRUE(torch::equal(cache.positions(0), torch::tensor({0, 4, 5, 6}).view({1, 1, 4})));
}

TEST(KvPolicy, TextsAreParsedAndBadOnesNamed) {
  EXPECT_TRUE(parse_kv_policy("full").full());
  auto q = parse_kv_policy("int4:group=16,residual=8");
  ASSERT_TRUE(q.quant);
  EXPECT_EQ(q.quant->bits, 4);
  EXPECT_EQ(q.quant->group, 16);
  EXPECT_EQ(q.quant->residual, 8);
  auto s = parse_kv_policy("streaming:sinks=4,window=64");
  EXPECT_EQ(s.sinks, 4);
  EXPECT_EQ(s.window, 64);
  EXPECT_FALSE(s.bounded());
  for (const char* bad : {"int3", "int8:grp=4", "streaming:sinks=4", "streaming:window=x",
                          "full:group=2", "h2o:budget=8,recent=8", "h2o:recent=2"}) {
    expect_rejected(bad);
  }
  model::Gpt m(decoder_with(false));
  EXPECT_THROW(make_kv_cache(parse_kv_policy("streaming:sinks=4,window=28"), *m, 1, 32),
               UsageError);  // S + W must stay below block_size 32
}

}  // namespace
}  // namespace lmtrain::infer
