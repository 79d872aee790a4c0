#include "data/token_split.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <numeric>

#include "core/error.h"
#include "data/token_shard.h"
#include "data/window_stream.h"
#include "test_util.h"

namespace lmtrain::data {
namespace {

using lmtrain::testing::TempDir;
using lmtrain::testing::write_text;

std::vector<uint32_t> split_test_tokens(size_t n) {
  std::vector<uint32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = static_cast<uint32_t>((i * 7919) % 1000);
  return t;
}

// Writes `tokens` as DIR/<split>_00000.bin ... cut at `cuts` (piece sizes; 0 = an empty piece).
void write_pieces(const std::string& dir, const std::string& split,
                  const std::vector<uint32_t>& tokens, const std::vector<size_t>& sizes) {
  size_t at = 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    std::vector<uint32_t> part(tokens.begin() + at, tokens.begin() + at + sizes[k]);
    write_shard(dir + "/" + split_piece_name(split, k), part, 2, "hash");
    at += sizes[k];
  }
  ASSERT_EQ(at, tokens.size());
}

TEST(TokenSplit, PiecesReadAsOneSequence) {
  TempDir dir("lmtrain_split");
  const auto tokens = split_test_tokens(1000);
  write_pieces(dir.path(), "train", tokens, {300, 0, 1, 450, 249});
  const TokenSplit split = TokenSplit::open(dir.path(), "train");
  EXPECT_EQ(split.pieces().size(), 5u);
  EXPECT_EQ(split.size(), 1000u);
  EXPECT_EQ(split.tokenizer_hash(), "hash");
  EXPECT_NE(split.path().find("(5 pieces)"), std::string::npos) << split.path();
  for (size_t i = 0; i < tokens.size(); ++i) ASSERT_EQ(split.at(i), tokens[i]) << i;
  // Windows across one, two and three piece boundaries (with the empty piece in between).
  for (size_t start : {0u, 290u, 299u, 300u, 301u, 745u, 990u}) {
    std::vector<int64_t> w(10);
    split.copy_window(start, 10, w.data());
    for (size_t k = 0; k < 10; ++k) EXPECT_EQ(w[k], tokens[start + k]) << start << "+" << k;
  }
  std::vector<int64_t> w(10);
  EXPECT_THROW(split.copy_window(995, 10, w.data()), Error);
  EXPECT_THROW(split.at(1000), Error);
}

// data.source=prepared keeps its window order: a split written as one train.bin and the same
// tokens written as pieces give the same windows in the same order.
TEST(TokenSplit, OneFileAndPiecesGiveTheSameWindows) {
  TempDir one("lmtrain_split1"), many("lmtrain_split2");
  const auto tokens = split_test_tokens(5000);
  write_shard(one.file("train.bin"), tokens, 2, "hash");
  write_pieces(many.path(), "train", tokens, {1234, 2000, 1766});
  const TokenSplit a = TokenSplit::open(one.path(), "train");
  const TokenSplit b = TokenSplit::open(many.path(), "train");
  EXPECT_EQ(a.pieces().size(), 1u);
  EXPECT_EQ(a.path(), one.file("train.bin"));
  WindowStream sa(a, 64, 1337, true), sb(b, 64, 1337, true);
  ASSERT_EQ(sa.num_windows(), sb.num_windows());
  for (int64_t epoch : {0, 1}) {
    std::vector<int64_t> ids;
    for (int64_t i = 0; i < sa.num_windows(); ++i) {
      ASSERT_EQ(sa.window_at(epoch, i), sb.window_at(epoch, i));
      ids.push_back(sa.window_at(epoch, i));
    }
    std::vector<int64_t> wa(ids.size() * 65), wb(ids.size() * 65);
    sa.copy_windows(ids, wa.data());
    sb.copy_windows(ids, wb.data());
    EXPECT_EQ(wa, wb);
  }
  // And the same as reading the one shard directly.
  const TokenShard shard(one.file("train.bin"));
  std::vector<int64_t> direct(65), via(65);
  shard.copy_window(64 * 20, 65, direct.data());
  sb.copy_windows({20}, via.data());
  EXPECT_EQ(direct, via);
}

TEST(TokenSplit, DamagedDirsAreRefused) {
  TempDir dir("lmtrain_split");
  const auto tokens = split_test_tokens(100);
  auto message = [&](const std::string& split) {
    try {
      TokenSplit::open(dir.path(), split);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(message("train").find("neither train.bin nor train_00000.bin"), std::string::npos);
  // A gap.
  write_shard(dir.file("train_00000.bin"), tokens, 2, "hash");
  write_shard(dir.file("train_00002.bin"), tokens, 2, "hash");
  EXPECT_NE(message("train").find("train_00001.bin is missing"), std::string::npos)
      << message("train");
  std::filesystem::remove(dir.file("train_00002.bin"));
  // prepare.json records more pieces than there are.
  write_text(dir.file("prepare.json"), R"({"pieces": {"train": 2, "val": 2}})");
  EXPECT_NE(message("train").find("records 2 train pieces but 1 are there"), std::string::npos)
      << message("train");
  std::filesystem::remove(dir.file("prepare.json"));
  // Both forms.
  write_shard(dir.file("train.bin"), tokens, 2, "hash");
  EXPECT_NE(message("train").find("holds both train.bin and train_00000.bin"), std::string::npos)
      << message("train");
  std::filesystem::remove(dir.file("train.bin"));
  // Pieces of another tokenizer.
  write_shard(dir.file("train_00001.bin"), tokens, 2, "other");
  EXPECT_NE(message("train").find("pieces of one split come from one prepare"), std::string::npos)
      << message("train");
}

}  // namespace
}  // namespace lmtrain::data
