// chat_batch: one conversation per row, the width its longest row rounded up to the bucket (at
// most seq_len), targets only where the mask marks the next token, padding ignored.
#include "train/chat_data.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/gpt.h"

namespace lmtrain::train {
namespace {

constexpr int64_t kI = model::kIgnoreIndex;

torch::Tensor chat_row(std::vector<int64_t> v) { return torch::tensor(v, torch::kLong); }

TEST(ChatBatch, PadsByBucketAndIgnoresWhatIsNotATarget) {
  // Row 0: 6 tokens, the last three targets; row 1: 3 tokens, the last one a target.
  const std::vector<std::vector<int64_t>> ids = {{10, 11, 12, 13, 14, 15}, {20, 21, 22}};
  const std::vector<std::vector<uint8_t>> targets = {{0, 0, 0, 1, 1, 1}, {0, 0, 1}};
  const auto b = chat_batch(ids, targets, /*seq_len=*/16, /*bucket=*/4, torch::kCPU);
  const auto x = b.inputs(), y = b.targets();
  ASSERT_EQ(x.sizes(), (std::vector<int64_t>{2, 8}));  // 5 inputs -> the bucket of 8
  EXPECT_TRUE(torch::equal(x[0], chat_row({10, 11, 12, 13, 14, 0, 0, 0})));
  EXPECT_TRUE(torch::equal(y[0], chat_row({kI, kI, 13, 14, 15, kI, kI, kI})));
  EXPECT_TRUE(torch::equal(x[1], chat_row({20, 21, 0, 0, 0, 0, 0, 0})));
  EXPECT_TRUE(torch::equal(y[1], chat_row({kI, 22, kI, kI, kI, kI, kI, kI})));
  EXPECT_EQ(b.valid_tokens, 4);
  EXPECT_TRUE(b.masked);
  // The width never passes seq_len, whatever the bucket.
  EXPECT_EQ(chat_batch(ids, targets, 4, 64, torch::kCPU).inputs().size(1), 4);
  // Cut at 4 inputs: row 0 keeps the targets 13 and 14, row 1 its 22.
  EXPECT_EQ(chat_batch(ids, targets, 4, 64, torch::kCPU).valid_tokens, 3);
}

}  // namespace
}  // namespace lmtrain::train
