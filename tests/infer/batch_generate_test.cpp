// Batched generation: left-padded rows of ragged prompts see the same positions and keys as each
// prompt alone (GPT-2 learned positions, RoPE + GQA + QK-norm, MoE), so batched greedy decoding
// equals unbatched decoding sequence by sequence, stops per row (end-of-text, max_new_tokens);
// policies that cannot pad batch equal lengths only; the prompt file and batch plan are checked.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/error.h"
#include "infer/generator.h"
#include "infer/prompt_file.h"
#include "kv_test_models.h"
#include "model/gpt.h"
#include "test_util.h"

namespace lmtrain::infer {
namespace {

// Ragged prompts need room: block 48.
model::GptConfig config(const std::string& family) {
  return tiny_decoder(family == "rope" ? "qwen3" : family, 48);
}

const std::vector<std::vector<uint32_t>> kPrompts = {
    {5, 9, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9}, {17}, {40, 41, 42, 43, 44}, {3, 3, 3, 3, 3, 3, 3}};

SamplingOptions greedy() {
  SamplingOptions o;
  o.temperature = 0;
  return o;
}

TEST(KvBatch, LeftPaddedRowsGiveEachPromptsOwnLogits) {
  for (const std::string family : {"gpt2", "rope", "moe"}) {
    auto m = eval_decoder(config(family), 21);
    torch::NoGradGuard g;
    const int64_t B = static_cast<int64_t>(kPrompts.size()), L = 9;
    std::vector<int64_t> ids, pad;
    for (const auto& p : kPrompts) {
      pad.push_back(L - static_cast<int64_t>(p.size()));
      ids.insert(ids.end(), L - p.size(), 0);
      ids.insert(ids.end(), p.begin(), p.end());
    }
    auto cache = m->make_cache(B, 16);
    cache->set_left_padding(torch::tensor(pad));
    auto prefill = m->forward_cached(torch::tensor(ids).view({B, L}), *cache);  // (B, L, V)
    auto next = torch::arange(B).view({B, 1}) + 10;
    auto step = m->forward_cached(next, *cache);  // (B, 1, V)
    for (int64_t b = 0; b < B; ++b) {
      const auto& p = kPrompts[static_cast<size_t>(b)];
      auto alone = m->make_cache(1, 16);
      std::vector<int64_t> row(p.begin(), p.end());
      auto want = m->forward_cached(torch::tensor(row).view({1, -1}), *alone);
      auto want_step = m->forward_cached(next.narrow(0, b, 1), *alone);
      auto got = prefill.narrow(0, b, 1).narrow(1, pad[static_cast<size_t>(b)], p.size());
      EXPECT_TRUE(torch::allclose(got, want, 1e-5, 1e-5))
          << family << " row " << b << ": " << (got - want).abs().max();
      EXPECT_TRUE(torch::allclose(step.narrow(0, b, 1), want_step, 1e-5, 1e-5))
          << family << " row " << b;
    }
  }
}

TEST(KvBatch, BatchedGreedyEqualsUnbatchedSequenceBySequence) {
  for (const std::string family : {"gpt2", "rope", "moe"}) {
    auto m = eval_decoder(config(family), 22);
    const std::vector<int64_t> max_new = {12, 20, 7, 16, 0};
    // An end-of-text id that the second prompt produces on its own at step 4, so that row stops
    // early while the others go on.
    const auto probe = generate(*m, kPrompts[1], 8, greedy(), 0, -1);
    const int64_t eot = probe[4];
    for (const char* policy : {"full", "int8:residual=64"}) {
      const auto kv = parse_kv_policy(policy);
      auto batch = generate_batch(*m, kPrompts, max_new, greedy(), 0, eot, kv).rows;
      ASSERT_EQ(batch.size(), kPrompts.size());
      for (size_t b = 0; b < kPrompts.size(); ++b) {
        auto alone = generate(*m, kPrompts[b], max_new[b], greedy(), 0, eot, {}, kv);
        EXPECT_EQ(batch[b].tokens, alone) << family << " " << policy << " row " << b;
        const bool hit_eot = !alone.empty() && static_cast<int64_t>(alone.back()) == eot;
        EXPECT_EQ(batch[b].stop, hit_eot ? StopReason::kEot : StopReason::kLength) << b;
      }
      EXPECT_EQ(batch[1].stop, StopReason::kEot);
      EXPECT_LE(batch[1].tokens.size(), 5u);
      EXPECT_TRUE(batch[4].tokens.empty());
    }
  }
}

TEST(KvBatch, StreamingBatchesEqualLengthsOnlyAndContextStopsAreReported) {
  auto m = eval_decoder(config("rope"), 23);
  const auto kv = parse_kv_policy("streaming:sinks=2,window=8");
  const std::vector<std::vector<uint32_t>> same = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}};
  auto batch = generate_batch(*m, same, {60, 60, 60}, greedy(), 0, -1, kv).rows;  // past block 48
  for (size_t b = 0; b < same.size(); ++b) {
    EXPECT_EQ(batch[b].tokens, generate(*m, same[b], 60, greedy(), 0, -1, {}, kv)) << b;
  }
  try {
    generate_batch(*m, kPrompts, {4, 4, 4, 4, 4}, greedy(), 0, -1, kv);
    ADD_FAILURE() << "ragged streaming batch accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("streaming:sinks=2,window=8"), std::string::npos);
  }
  // The full cache ends at block_size: the longest prompt (9) leaves 39 new tokens.
  auto bounded = generate_batch(*m, kPrompts, {100, 100, 100, 100, 100}, greedy(), 0, -1).rows;
  for (const auto& r : bounded) {
    EXPECT_EQ(r.stop, StopReason::kContext);
    EXPECT_EQ(r.tokens.size(), 39u);
  }
}

TEST(KvBatch, PromptFileLinesAreCheckedAndBatchesPlannedShortestFirst) {
  testing::TempDir dir;
  const std::string path = dir.file("p.jsonl");
  testing::write_text(
      path, "{\"prompt\": \"a b\", \"id\": \"x\"}\n\n{\"prompt\": \"c\", \"max_new_tokens\": 3}\n");
  auto lines = read_prompt_file(path);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].id_json, "\"x\"");
  EXPECT_EQ(lines[1].id_json, "3");  // the line number
  EXPECT_EQ(lines[1].max_new_tokens, 3);
  for (const char* bad : {"[1]", "{\"prompt\": 5}", "{\"text\": \"a\"}",
                          "{\"prompt\": \"a\", "
                          "\"max_new_tokens\": -1}",
                          "{\"prompt\": \"a\", \"extra\": 1}", "{oops"}) {
    testing::write_text(path, std::string("{\"prompt\": \"fine\"}\n") + bad + "\n");
    try {
      read_prompt_file(path);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(dynamic_cast<const UsageError*>(&e), nullptr) << "bad data: " << e.what();
      EXPECT_NE(std::string(e.what()).find(path + ":2"), std::string::npos) << e.what();
    }
  }
  using Plan = std::vector<std::vector<size_t>>;
  EXPECT_EQ(plan_batches({5, 2, 5, 3, 2}, 2, false), (Plan{{1, 4}, {3, 0}, {2}}));
  EXPECT_EQ(plan_batches({5, 2, 5, 3, 2}, 4, true), (Plan{{1, 4}, {3}, {0, 2}}));
}

}  // namespace
}  // namespace lmtrain::infer
