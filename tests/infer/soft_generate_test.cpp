// Generation with soft tokens in the prompt (infer/generator.h, PromptSoftTokens: what
// `lmtrain generate --series` feeds a temporal run's LM): greedy decoding through the KV cache
// equals re-running the whole forward with the soft tokens at every step; left-padded batches
// equal each prompt alone; a streaming cache's chunked prefill places each chunk's soft tokens;
// entries that do not fit the prompts are refused.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "core/error.h"
#include "infer/generator.h"
#include "kv_test_models.h"
#include "model/gpt.h"
#include "model/soft_tokens.h"

namespace lmtrain::infer {
namespace {

SamplingOptions greedy_sampling() {
  SamplingOptions o;
  o.temperature = 0;
  return o;
}

// Soft tokens for `prompt` at the flagged positions: values (n, 32) drawn from `seed`, at about
// three times the embeddings' scale so that they change what the model says.
PromptSoftTokens soft_for(const std::vector<uint8_t>& flags, uint64_t seed) {
  torch::manual_seed(seed);
  int64_t n = 0;
  for (auto f : flags) n += f;
  return PromptSoftTokens{{flags}, {torch::randn({n, 32}) * 3}};
}

// The reference: the whole sequence's forward with the prompt's soft tokens, once per new token.
std::vector<uint32_t> greedy_by_full_forward(model::GptImpl& m, std::vector<uint32_t> seq,
                                             const PromptSoftTokens& soft, int64_t max_new) {
  torch::NoGradGuard g;
  const size_t prompt_len = seq.size();
  std::vector<uint32_t> out;
  for (int64_t i = 0; i < max_new; ++i) {
    const auto T = static_cast<int64_t>(seq.size());
    std::vector<int64_t> ids(seq.begin(), seq.end());
    auto slots = torch::zeros({1, T}, torch::kBool);
    auto sl = slots.accessor<bool, 2>();
    for (size_t t = 0; t < prompt_len; ++t) sl[0][static_cast<int64_t>(t)] = soft.slots[0][t] != 0;
    model::SoftTokens s{slots, soft.values[0]};
    auto logits = m.logits(m.final_hidden(torch::tensor(ids).view({1, T}), s));
    const auto next = static_cast<uint32_t>(logits[0][T - 1].argmax().item<int64_t>());
    out.push_back(next);
    seq.push_back(next);
  }
  return out;
}

TEST(SoftGenerate, CachedGreedyEqualsTheFullForwardWithSoftTokens) {
  const std::vector<uint32_t> prompt = {5, 9, 2, 2, 2, 7, 11};
  // The last prompt position is a soft one: the first new token's logits come straight from it
  // (through attention alone, a random tiny decoder's soft tokens barely move them).
  const std::vector<uint8_t> flags = {0, 0, 1, 1, 0, 0, 1};
  for (const std::string family : {"gpt2", "rope"}) {
    auto m = eval_decoder(tiny_decoder(family), 31);
    int differs = 0;
    for (uint64_t seed : {1, 2, 3}) {
      const auto soft = soft_for(flags, seed);
      const auto got = generate(*m, prompt, 10, greedy_sampling(), 0, -1, {}, KvPolicy(), soft);
      EXPECT_EQ(got, greedy_by_full_forward(*m, prompt, soft, 10)) << family << " seed " << seed;
      differs += got != generate(*m, prompt, 10, greedy_sampling(), 0, -1);
    }
    // The soft tokens are used: some draw changes the answer of the plain prompt.
    EXPECT_GT(differs, 0) << family;
  }
}

TEST(SoftGenerate, LeftPaddedBatchEqualsEachPromptAlone) {
  const std::vector<std::vector<uint32_t>> prompts = {
      {5, 9, 2, 2, 7}, {1, 2, 3, 3, 3, 3, 4, 5, 6}, {17, 4}};
  const std::vector<std::vector<uint8_t>> flags = {
      {0, 0, 1, 1, 0}, {0, 0, 1, 1, 1, 1, 0, 0, 0}, {0, 0}};
  PromptSoftTokens soft;
  for (size_t b = 0; b < prompts.size(); ++b) {
    const auto one = soft_for(flags[b], 40 + b);
    soft.slots.push_back(one.slots[0]);
    soft.values.push_back(one.values[0]);
  }
  auto m = eval_decoder(tiny_decoder("qwen3", 48), 32);
  for (const char* policy : {"full", "int8:residual=64"}) {
    const auto kv = parse_kv_policy(policy);
    const auto batch =
        generate_batch(*m, prompts, {8, 8, 8}, greedy_sampling(), 0, -1, kv, {}, soft).rows;
    for (size_t b = 0; b < prompts.size(); ++b) {
      const PromptSoftTokens alone{{soft.slots[b]}, {soft.values[b]}};
      EXPECT_EQ(batch[b].tokens,
                generate(*m, prompts[b], 8, greedy_sampling(), 0, -1, {}, kv, alone))
          << policy << " row " << b;
    }
  }
}

TEST(SoftGenerate, StreamingChunkedPrefillPlacesEachChunksSoftTokens) {
  // block 32, 4 sinks + a window of 20: prompts are prefilled in chunks of 8 tokens, and 24
  // tokens in all fit without eviction, so the answer equals the full cache's.
  std::vector<uint32_t> prompt;
  std::vector<uint8_t> flags;
  for (uint32_t t = 0; t < 18; ++t) {
    prompt.push_back(3 + t);
    flags.push_back(t >= 6 && t <= 10 ? 1 : 0);  // across the first chunk boundary
  }
  const auto soft = soft_for(flags, 7);
  auto m = eval_decoder(tiny_decoder("rope", 32), 33);
  const auto streaming = generate(*m, prompt, 5, greedy_sampling(), 0, -1, {},
                                  parse_kv_policy("streaming:sinks=4,window=20"), soft);
  EXPECT_EQ(streaming, generate(*m, prompt, 5, greedy_sampling(), 0, -1, {}, KvPolicy(), soft));
  EXPECT_EQ(streaming, greedy_by_full_forward(*m, prompt, soft, 5));
}

TEST(SoftGenerate, SoftTokensThatDoNotFitThePromptsAreRefused) {
  auto m = eval_decoder(tiny_decoder("gpt2"), 34);
  const std::vector<uint32_t> prompt = {1, 2, 3};
  auto expect_error = [&](const PromptSoftTokens& soft, const std::string& part) {
    try {
      generate(*m, prompt, 2, greedy_sampling(), 0, -1, {}, KvPolicy(), soft);
      ADD_FAILURE() << "accepted: " << part;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect_error({{{0, 1}}, {torch::zeros({1, 32})}}, "2 slot flags");         // too short
  expect_error({{{0, 1, 1}}, {torch::zeros({1, 32})}}, "expected (2, 32)");  // count
  expect_error({{{0, 1, 0}}, {torch::zeros({1, 16})}}, "expected (1, 32)");  // width
  expect_error({{{0, 1, 0}, {0, 0, 0}}, {torch::zeros({1, 32})}}, "soft tokens given for 2");
}

}  // namespace
}  // namespace lmtrain::infer
