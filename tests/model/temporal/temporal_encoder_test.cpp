// The time-series encoder's parts on the CPU: per-series normalisation (masked values, NaN,
// constant series), patching (padding, mask channel, valid patches), the soft-token seam of the
// decoder (soft tokens equal to token embeddings give the very same forward; gradients reach
// them), and the projector's output RMS at initialisation. Parity of the whole encoder + frozen
// LM with PyTorch is tests/e2e/temporal_parity_test.cpp.
#include "model/temporal/temporal_encoder.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "core/error.h"
#include "model/gpt.h"
#include "model/soft_tokens.h"
#include "model/temporal/patching.h"
#include "model/temporal/series_norm.h"
#include "model_fixtures.h"

namespace lmtrain::model::temporal {
namespace {

TEST(SeriesNorm, MeanAndStdOverValidValuesOnly) {
  auto values = torch::tensor({1.0f, 2.0f, 3.0f, std::numeric_limits<float>::quiet_NaN(), 1e9f})
                    .reshape({1, 1, 5});
  auto valid = torch::tensor({true, true, true, false, false}).reshape({1, 1, 5});
  auto n = normalise_series(values, valid);
  EXPECT_NEAR(n.mean.item<float>(), 2.0f, 1e-6);
  EXPECT_NEAR(n.std.item<float>(), std::sqrt(2.0f / 3.0f), 1e-6);
  EXPECT_TRUE(torch::isfinite(n.values).all().item<bool>());
  EXPECT_EQ(n.values[0][0][3].item<float>(), 0.0f);
  EXPECT_EQ(n.values[0][0][4].item<float>(), 0.0f);
  EXPECT_NEAR(n.values[0][0][0].item<float>(), -1.0f / std::sqrt(2.0f / 3.0f), 1e-5);
}

TEST(SeriesNorm, ConstantAndEmptySeriesStayFinite) {
  auto values = torch::full({2, 1, 4}, 7.0f);
  auto valid = torch::ones({2, 1, 4}, torch::kBool);
  valid[1].fill_(false);
  auto n = normalise_series(values, valid);
  EXPECT_TRUE(torch::isfinite(n.values).all().item<bool>());
  EXPECT_FLOAT_EQ(n.std[0][0].item<float>(), static_cast<float>(kMinSeriesStd));
  EXPECT_FLOAT_EQ(n.mean[1][0].item<float>(), 0.0f);
  EXPECT_EQ(n.values.abs().sum().item<float>(), 0.0f);
}

TEST(Patching, PadsTheShortLastPatchAndMarksItsMask) {
  TemporalEncoderOptions o;
  o.channels = 2;
  o.patch_len = 4;
  o.stride = 3;
  // L = 9: starts 0, 3, 6 -> 3 patches, the last (6..9) one value short.
  EXPECT_EQ(o.patches_for(9), 3);
  EXPECT_EQ(o.patches_for(4), 1);
  EXPECT_EQ(o.patches_for(2), 1);
  auto values = torch::arange(18, torch::kFloat).reshape({1, 2, 9});
  values.index_put_({0, 0, 4}, 14.0f);  // a spike of +10 on channel 0's ramp
  auto valid = torch::ones({1, 2, 9}, torch::kBool);
  auto p = make_patches(values, valid, o);
  ASSERT_EQ(p.features.sizes(), (std::vector<int64_t>{1, 3, 3 * 2 * 4}));
  // Patch 1: channel 0 values 3..6 (the spike at 4), channel 1 values 12..15; then the local
  // deviations (the ramp's are 0; the spike's +10 and half of it off each neighbour); then
  // both masks all ones.
  auto expect = torch::tensor({3.f,  14.f, 5.f,  6.f, 12.f, 13.f, 14.f, 15.f,  //
                               -5.f, 10.f, -5.f, 0.f, 0.f,  0.f,  0.f,  0.f,   //
                               1.f,  1.f,  1.f,  1.f, 1.f,  1.f,  1.f,  1.f});
  EXPECT_TRUE(torch::equal(p.features[0][1], expect)) << p.features[0][1];
  // The first and last values have one neighbour: deviation 0.
  EXPECT_EQ(p.features[0][0][8].item<float>(), 0.0f);
  // Patch 2 (values 6..8, then padding): the last value and the padded position have
  // deviation 0, the padded position value 0 and mask 0.
  EXPECT_EQ(p.features[0][2][2].item<float>(), 8.0f);
  EXPECT_EQ(p.features[0][2][8 + 2].item<float>(), 0.0f);
  EXPECT_EQ(p.features[0][2][3].item<float>(), 0.0f);
  EXPECT_EQ(p.features[0][2][8 + 3].item<float>(), 0.0f);
  EXPECT_EQ(p.features[0][2][16 + 3].item<float>(), 0.0f);
  // A series valid only in its first 3 values: patch 0 valid, patches 1 and 2 not.
  valid.index_put_({0, torch::indexing::Slice(), torch::indexing::Slice(3)}, false);
  EXPECT_TRUE(torch::equal(make_patches(values, valid, o).valid,
                           torch::tensor({true, false, false}).reshape({1, 3})));
}

GptConfig tiny_lm() { return tiny_gpt_config(8, 11, 16); }

TEST(SoftTokens, TokenEmbeddingsAsSoftTokensGiveTheSameForward) {
  torch::manual_seed(0);
  Gpt lm(tiny_lm());
  auto ids = torch::randint(1, 11, {2, 6}, torch::kLong);
  auto slots = torch::zeros({2, 6}, torch::kBool);
  slots.index_put_({0, torch::indexing::Slice(1, 3)}, true);
  slots.index_put_({1, 4}, true);
  // The soft tokens are the embeddings of the ids at the slots; the ids there become 0.
  auto values = lm->transformer->wte->weight.index_select(0, ids.masked_select(slots)).detach();
  auto placeholder_ids = ids.masked_fill(slots, 0);
  SoftTokens soft{slots, values.clone().requires_grad_(true)};
  auto with_soft = lm->final_hidden(placeholder_ids, soft);
  auto plain = lm->final_hidden(ids);
  EXPECT_TRUE(torch::allclose(with_soft, plain, 0, 0)) << (with_soft - plain).abs().max();
  // Gradients reach the soft tokens, and only positions at or after a slot depend on it.
  with_soft.sum().backward();
  ASSERT_TRUE(soft.values.grad().defined());
  EXPECT_GT(soft.values.grad().abs().sum().item<float>(), 0.0f);
  // The row-major order: swapping the two values of row 0 changes row 0 only.
  auto swapped = values.clone();
  swapped[0] = values[1];
  swapped[1] = values[0];
  auto other = lm->final_hidden(placeholder_ids, SoftTokens{slots, swapped});
  EXPECT_FALSE(torch::allclose(other[0], plain[0]));
  EXPECT_TRUE(torch::allclose(other[1], plain[1], 0, 0));
}

TEST(SoftTokens, WrongCountsAndShapesAreErrors) {
  Gpt lm(tiny_lm());
  auto ids = torch::zeros({1, 4}, torch::kLong);
  auto slots = torch::zeros({1, 4}, torch::kBool);
  slots[0][1] = true;
  EXPECT_THROW(lm->final_hidden(ids, SoftTokens{slots, torch::zeros({2, 8})}), Error);
  EXPECT_THROW(lm->final_hidden(ids, SoftTokens{slots, torch::zeros({1, 7})}), Error);
  EXPECT_THROW(lm->final_hidden(ids, SoftTokens{slots.reshape({4, 1}), torch::zeros({1, 8})}),
               Error);
}

TEST(TemporalEncoder, SoftTokensStartAtTheLmEmbeddingRms) {
  torch::manual_seed(0);
  for (const int64_t pooled : {0, 3}) {
    TemporalEncoderOptions o;
    o.channels = 2;
    o.max_length = 64;
    o.patch_len = 8;
    o.stride = 8;
    o.layers = 2;
    o.width = 16;
    o.heads = 2;
    o.num_tokens = pooled;
    o.lm_width = 24;
    TemporalEncoder enc(o);
    auto wte = torch::randn({50, 24}) * 0.37;
    const double rms = token_embedding_rms(wte);
    enc->set_output_rms(rms);
    auto values = torch::randn({3, 2, 40}) * 5 + 100;
    auto valid = torch::ones({3, 2, 40}, torch::kBool);
    valid.index_put_({2, torch::indexing::Slice(), torch::indexing::Slice(17)}, false);
    auto out = enc->forward(values, valid);
    const int64_t S = pooled ? pooled : o.patches_for(40) + 1;  // patches and the summary
    ASSERT_EQ(out.tokens.sizes(), (std::vector<int64_t>{3, S, 24}));
    ASSERT_EQ(out.valid.sizes(), (std::vector<int64_t>{3, S}));
    // 17 values: 3 patches and the summary token.
    EXPECT_EQ(out.valid[2].sum().item<int64_t>(), pooled ? pooled : 4);
    // Within 5%: the RMSNorm's epsilon (1e-5) against the projector's mean square (1e-4..1e-2).
    auto token_rms = out.tokens.pow(2).mean(-1).sqrt();  // (3, S)
    EXPECT_TRUE(torch::allclose(token_rms, torch::full_like(token_rms, rms), 0.05, 0)) << token_rms;
  }
}

// projector vocab_mix: each soft token is softmax(logits over the LM's vocabulary) @ its
// token-embedding table, so it lies in the convex hull of the LM's word embeddings; logits that
// favour one word make the soft token that word's embedding. The table is lent, not saved.
TEST(TemporalEncoder, VocabMixSoftTokensAreMixesOfTheLmWordEmbeddings) {
  torch::manual_seed(0);
  TemporalEncoderOptions o;
  o.max_length = 32;
  o.patch_len = 8;
  o.stride = 8;
  o.layers = 1;
  o.width = 16;
  o.heads = 2;
  o.num_tokens = 3;
  o.lm_width = 12;
  o.lm_vocab = 20;
  o.projector = ProjectorKind::kVocabMix;
  TemporalEncoder enc(o);
  const auto names = enc->named_parameters().keys();
  EXPECT_NE(std::find(names.begin(), names.end(), "proj_vocab.weight"), names.end());
  EXPECT_EQ(std::find(names.begin(), names.end(), "proj_fc2.weight"), names.end());
  EXPECT_EQ(enc->buffers().size(), 0u);  // the LM's table is no state of the encoder
  auto values = torch::randn({2, 1, 32});
  auto valid = torch::ones({2, 1, 32}, torch::kBool);
  EXPECT_THROW(enc->forward(values, valid), Error);  // no table lent yet
  EXPECT_THROW(enc->set_vocab_table(torch::randn({21, 12})), Error);
  auto wte = torch::randn({20, 12});
  enc->set_vocab_table(wte);
  auto out = enc->forward(values, valid);
  ASSERT_EQ(out.tokens.sizes(), (std::vector<int64_t>{2, 3, 12}));
  {
    // Equal logits: every soft token is the table's mean embedding.
    torch::NoGradGuard no_grad;
    enc->proj_vocab->weight.zero_();
    enc->proj_vocab->bias.zero_();
  }
  out = enc->forward(values, valid);
  EXPECT_TRUE(torch::allclose(out.tokens, wte.mean(0).expand({2, 3, 12}), 1e-5, 1e-6));
  {
    // A bias that dominates the logits picks word 7 for every soft token.
    torch::NoGradGuard no_grad;
    enc->proj_vocab->bias.zero_();
    enc->proj_vocab->bias[7] = 1e4;
  }
  out = enc->forward(values, valid);
  EXPECT_TRUE(torch::allclose(out.tokens, wte[7].expand({2, 3, 12}), 1e-5, 1e-6));
  // Gradients reach the logits through the table (the table itself is detached).
  {
    torch::NoGradGuard no_grad;
    enc->proj_vocab->bias[7] = 0.0;
  }
  auto loss = enc->forward(values, valid).tokens.pow(2).sum();
  loss.backward();
  EXPECT_TRUE(enc->proj_vocab->bias.grad().defined());
  EXPECT_GT(enc->proj_vocab->bias.grad().abs().sum().item<double>(), 0.0);
  EXPECT_FALSE(wte.grad().defined());
  EXPECT_THROW(parse_projector_kind("linear"), UsageError);
  EXPECT_EQ(parse_projector_kind("vocab_mix"), ProjectorKind::kVocabMix);
}

TEST(TemporalEncoder, RefusesBadShapes) {
  TemporalEncoderOptions o;
  o.lm_width = 8;
  o.width = 10;
  o.heads = 4;
  EXPECT_THROW(TemporalEncoder{o}, UsageError);
  o.heads = 2;
  o.max_length = 32;
  TemporalEncoder enc(o);
  EXPECT_THROW(enc->forward(torch::zeros({1, 1, 33}), torch::ones({1, 1, 33}, torch::kBool)),
               Error);
  EXPECT_THROW(enc->forward(torch::zeros({1, 2, 8}), torch::ones({1, 2, 8}, torch::kBool)), Error);
}

}  // namespace
}  // namespace lmtrain::model::temporal
