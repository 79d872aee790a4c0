// The continuous-batching cache: rows that join a running batch (longer or shorter than it, alone
// or several left-padded together) and rows that leave it each see, at every decode step, the
// logits of their own sequence run alone through the exact cache (GPT-2 learned positions,
// RoPE + GQA + QK-norm, dropless MoE, sliding windows); rows stay finite through moves (the pad
// slots a move creates are zeros, masked).
#include "infer/ragged_kv_cache.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "kv_test_models.h"
#include "model/gpt.h"

namespace lmtrain::infer {
namespace {

// The last position's logits (1, V) of `seq` prefilled alone into the model's exact cache.
at::Tensor alone_logits(model::GptImpl& m, const std::vector<int64_t>& seq) {
  auto cache = m.make_cache(1, m.config().block_size);
  auto ids = torch::tensor(seq).view({1, -1});
  return m.forward_cached(ids, *cache).select(1, ids.size(1) - 1);
}

// A running batch driven by hand: each row's sequence so far, and the cache.
struct Batch {
  model::GptImpl& m;
  RaggedKvCache cache;
  std::vector<std::vector<int64_t>> seqs;
  std::string label;
  int steps = 0;

  // Prompts prefilled together (left-padded) in a cache of their own, then joined.
  void join(const std::vector<std::vector<int64_t>>& prompts) {
    size_t L = 0;
    for (const auto& p : prompts) L = std::max(L, p.size());
    std::vector<int64_t> ids, pad;
    for (const auto& p : prompts) {
      pad.push_back(static_cast<int64_t>(L - p.size()));
      ids.insert(ids.end(), L - p.size(), 0);
      ids.insert(ids.end(), p.begin(), p.end());
    }
    RaggedKvCache fresh(m, pad);
    auto logits = m.forward_cached(
        torch::tensor(ids).view({static_cast<int64_t>(prompts.size()), -1}), fresh);
    for (size_t b = 0; b < prompts.size(); ++b) {
      auto got = logits.select(1, logits.size(1) - 1).narrow(0, static_cast<int64_t>(b), 1);
      expect_alone(got, prompts[b], "prefill");
      seqs.push_back(prompts[b]);
      seqs.back().push_back(got.argmax(-1).item<int64_t>());
    }
    cache.join(std::move(fresh));
    EXPECT_EQ(fresh.rows(), 0);
  }
  // One (B, 1) decode step of every row; each appends its greedy token.
  void step() {
    std::vector<int64_t> last;
    for (const auto& s : seqs) last.push_back(s.back());
    auto logits = m.forward_cached(torch::tensor(last).view({-1, 1}), cache).select(1, 0);
    ++steps;
    for (size_t b = 0; b < seqs.size(); ++b) {
      auto got = logits.narrow(0, static_cast<int64_t>(b), 1);
      expect_alone(got, seqs[b], "step " + std::to_string(steps));
      seqs[b].push_back(got.argmax(-1).item<int64_t>());
    }
  }
  void keep(const std::vector<int64_t>& rows) {
    cache.keep_rows(rows);
    std::vector<std::vector<int64_t>> kept;
    for (const auto r : rows) kept.push_back(seqs[static_cast<size_t>(r)]);
    seqs = kept;
    // The slots no row uses are gone: the longest row has no padding.
    size_t longest = 0;
    for (const auto& s : seqs) longest = std::max(longest, s.size() - 1);
    EXPECT_EQ(cache.held(), static_cast<int64_t>(longest)) << label;
  }
  void expect_alone(const at::Tensor& got, const std::vector<int64_t>& seq,
                    const std::string& when) {
    auto want = alone_logits(m, seq);
    ASSERT_TRUE(torch::isfinite(got).all().item<bool>()) << label << " " << when;
    EXPECT_TRUE(torch::allclose(got, want, 1e-5, 1e-5))
        << label << " " << when << ", a row of " << seq.size()
        << " tokens: " << (got - want).abs().max();
  }
};

TEST(RaggedKvCache, RowsJoiningAndLeavingARunningBatchSeeTheirOwnLogits) {
  std::vector<std::pair<std::string, model::GptConfig>> models = {
      {"gpt2", tiny_decoder("gpt2", 64)},
      {"qwen3", tiny_decoder("qwen3", 64)},
      {"moe", tiny_decoder("moe", 64)},
      {"windowed", windowed_decoder({4, 0}, 64)}};
  for (auto& [name, config] : models) {
    auto m = eval_decoder(config, 31);
    torch::NoGradGuard no_grad;
    Batch batch{*m, RaggedKvCache(*m, {}), {}, name};
    batch.join({{5, 9, 2, 7, 1}});  // alone: no padding, the model's unmasked path
    for (int i = 0; i < 3; ++i) batch.step();
    EXPECT_EQ(batch.cache.held(), 8);
    batch.join({{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}});  // longer than the batch: it moves right
    EXPECT_EQ(batch.cache.row_padding(), (std::vector<int64_t>{3, 0}));
    for (int i = 0; i < 2; ++i) batch.step();
    batch.join({{17, 18}, {40, 41, 42, 43, 44, 45}});  // two at once, padded among themselves
    EXPECT_EQ(batch.cache.row_padding(), (std::vector<int64_t>{3, 0, 11, 7}));
    for (int i = 0; i < 2; ++i) batch.step();
    batch.keep({2, 3});  // the first two leave: the slots only they used are trimmed
    EXPECT_EQ(batch.cache.row_padding(), (std::vector<int64_t>{4, 0}));
    for (int i = 0; i < 3; ++i) batch.step();
    batch.keep({});
    EXPECT_EQ(batch.cache.held(), 0);
    batch.join({{3, 3, 3}});  // an emptied batch starts again
    for (int i = 0; i < 2; ++i) batch.step();
  }
}

}  // namespace
}  // namespace lmtrain::infer
