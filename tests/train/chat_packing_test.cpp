// SFT packing (train/chat_packing.h): conversations into rows of data.seq_len slots, first fit
// among the open rows, and the packed batch's inputs, targets and document indices.
#include "train/chat_packing.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/gpt.h"

namespace lmtrain::train {
namespace {

TEST(ChatPacking, FirstFitKeepsOrderAndCapacity) {
  // widths 6, 5, 3, 0 (left out), 4, 12 (cut to the capacity of 10), 1
  const std::vector<int64_t> widths = {6, 5, 3, 0, 4, 12, 1};
  const auto rows = pack_conversations(widths, {0, 1, 2, 3, 4, 5, 6}, 10);
  // 0 opens row 0 (6); 1 does not fit (11): row 1 (5); 2 fits row 0 (9); 4 fits row 1 (9);
  // 5 opens row 2 (10); 6 fits row 0 (10).
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0], (std::vector<int64_t>{0, 2, 6}));
  EXPECT_EQ(rows[1], (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(rows[2], (std::vector<int64_t>{5}));
  // Another order, other rows; every conversation with a slot placed exactly once.
  const auto other = pack_conversations(widths, {6, 5, 4, 3, 2, 1, 0}, 10);
  std::vector<int> seen(widths.size(), 0);
  for (const auto& r : other) {
    for (int64_t c : r) ++seen[static_cast<size_t>(c)];
  }
  EXPECT_EQ(seen, (std::vector<int>{1, 1, 1, 0, 1, 1, 1}));
}

TEST(ChatPacking, BatchHoldsEachConversationShiftedWithItsDocumentIndex) {
  // Row 0: [10 11 12] (targets at 11, 12) and [20 21] (target at 21); row 1: [30 31 32 33].
  std::vector<std::vector<PackedPart>> rows(2);
  rows[0].push_back({{10, 11, 12}, {0, 1, 1}});
  rows[0].push_back({{20, 21}, {0, 1}});
  rows[1].push_back({{30, 31, 32, 33}, {0, 0, 1, 0}});
  const Batch b = packed_chat_batch(rows, 8, 4, torch::kCPU);
  const int64_t I = model::kIgnoreIndex;
  EXPECT_TRUE(torch::equal(
      b.inputs(), torch::tensor({10, 11, 20, 0, 30, 31, 32, 0}, torch::kLong).view({2, 4})));
  EXPECT_TRUE(torch::equal(
      b.targets(), torch::tensor(std::vector<int64_t>{11, 12, 21, I, I, 32, I, I}).view({2, 4})));
  EXPECT_TRUE(torch::equal(b.tensors.at("documents"),
                           torch::tensor({0, 0, 1, 2, 0, 0, 0, 1}, torch::kLong).view({2, 4})));
  EXPECT_EQ(b.valid_tokens, 4);
  EXPECT_TRUE(b.masked);
}

}  // namespace
}  // namespace lmtrain::train
