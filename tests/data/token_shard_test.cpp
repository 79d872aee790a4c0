#include "data/token_shard.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "test_util.h"

namespace lmtrain::data {
namespace {

using lmtrain::testing::read_text;
using lmtrain::testing::TempDir;
using lmtrain::testing::write_text;

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ShardTest, DtypeForVocab) {
  EXPECT_EQ(shard_dtype_for_vocab(50257), 2);
  EXPECT_EQ(shard_dtype_for_vocab(65536), 2);
  EXPECT_EQ(shard_dtype_for_vocab(65537), 4);
}

TEST(ShardTest, Uint16RoundTrip) {
  TempDir dir;
  const std::string path = dir.file("a.bin");
  std::vector<uint32_t> tokens;
  for (uint32_t i = 0; i < 1000; ++i) tokens.push_back((i * 7919) % 65536);
  tokens.push_back(65535);
  write_shard(path, tokens, 2, "0123456789abcdef");
  EXPECT_EQ(std::filesystem::file_size(path), 64 + 2 * tokens.size());
  const std::string raw = read_text(path);
  EXPECT_EQ(raw.substr(0, 8), "LMTSHARD");
  EXPECT_EQ(static_cast<unsigned char>(raw[8]), 1);   // version, little-endian
  EXPECT_EQ(static_cast<unsigned char>(raw[12]), 2);  // dtype_bytes

  const TokenShard shard(path);
  EXPECT_EQ(shard.size(), tokens.size());
  EXPECT_EQ(shard.dtype_bytes(), 2);
  EXPECT_EQ(shard.tokenizer_hash(), "0123456789abcdef");
  for (size_t i = 0; i < tokens.size(); ++i) ASSERT_EQ(shard.at(i), tokens[i]);
  std::vector<int64_t> window(10);
  shard.copy_window(995, 6, window.data());
  for (size_t k = 0; k < 6; ++k) EXPECT_EQ(window[k], static_cast<int64_t>(tokens[995 + k]));
  EXPECT_THROW(shard.at(tokens.size()), Error);
  EXPECT_THROW(shard.copy_window(996, 6, window.data()), Error);
}

TEST(ShardTest, Uint32RoundTripAndLongHashIsTruncated) {
  TempDir dir;
  const std::string path = dir.file("b.bin");
  const std::vector<uint32_t> tokens = {0, 70000, 4000000000u, 1, 65536};
  write_shard(path, tokens, 4, std::string(40, 'f'));
  TokenShard shard(path);
  EXPECT_EQ(shard.dtype_bytes(), 4);
  EXPECT_EQ(shard.tokenizer_hash(), std::string(32, 'f'));
  std::vector<int64_t> window(5);
  shard.copy_window(0, 5, window.data());
  EXPECT_EQ(window, (std::vector<int64_t>{0, 70000, 4000000000LL, 1, 65536}));
  // Moving keeps the mapping valid.
  TokenShard moved = std::move(shard);
  EXPECT_EQ(moved.at(2), 4000000000u);
}

TEST(ShardTest, EmptyShardAndStreamingWriter) {
  TempDir dir;
  write_shard(dir.file("empty.bin"), {}, 2, "h");
  EXPECT_EQ(TokenShard(dir.file("empty.bin")).size(), 0u);

  {
    ShardWriter w(dir.file("s.bin"), 2, "h");
    w.append({1, 2, 3});
    w.append({4});
    EXPECT_FALSE(std::filesystem::exists(dir.file("s.bin")));  // appears only when finished
    w.finish();
  }
  TokenShard s(dir.file("s.bin"));
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s.at(3), 4u);
  {
    ShardWriter abandoned(dir.file("never.bin"), 2, "h");
    abandoned.append({1});
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("never.bin")));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 2);
}

TEST(ShardTest, IdTooLargeForUint16IsRejected) {
  TempDir dir;
  EXPECT_THROW(write_shard(dir.file("x.bin"), {1, 65536}, 2, "h"), Error);
  EXPECT_THROW(write_shard(dir.file("x.bin"), {1}, 3, "h"), Error);
}

TEST(ShardTest, TruncatedShardIsRejected) {
  TempDir dir;
  const std::string path = dir.file("t.bin");
  write_shard(path, {1, 2, 3, 4}, 2, "h");
  std::filesystem::resize_file(path, 64 + 7);
  const std::string msg = error_of([&] { TokenShard s(path); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;

  std::filesystem::resize_file(path, 10);
  EXPECT_NE(error_of([&] { TokenShard s(path); }).find("too small"), std::string::npos);
  EXPECT_NE(error_of([&] { TokenShard s(dir.file("none.bin")); }).find("none.bin"),
            std::string::npos);
}

TEST(ShardTest, BadMagicIsRejected) {
  TempDir dir;
  const std::string path = dir.file("m.bin");
  write_shard(path, {1, 2}, 2, "h");
  std::string raw = read_text(path);
  raw[0] = 'X';
  write_text(path, raw);
  const std::string msg = error_of([&] { TokenShard s(path); });
  EXPECT_NE(msg.find("bad magic"), std::string::npos) << msg;
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
}

TEST(ShardTest, IdOutsideTheVocabularyNamesFileOffsetAndId) {
  TempDir dir;
  for (int dtype : {2, 4}) {
    const std::string path = dir.file("v" + std::to_string(dtype) + ".bin");
    write_shard(path, {1, 2, 3, 500, 4}, dtype, "h");
    TokenShard shard(path);
    shard.set_vocab_size(384);
    std::vector<int64_t> out(5);
    shard.copy_window(0, 3, out.data());  // ids 1..3 are fine
    EXPECT_EQ(shard.at(4), 4u);
    const std::string offset = std::to_string(64 + 3 * dtype);
    for (const std::string& msg :
         {error_of([&] { shard.copy_window(1, 4, out.data()); }), error_of([&] { shard.at(3); })}) {
      EXPECT_NE(msg.find(path), std::string::npos) << msg;
      EXPECT_NE(msg.find("token id 500 at byte offset " + offset + " (token 3)"), std::string::npos)
          << msg;
      EXPECT_NE(msg.find("vocabulary of 384"), std::string::npos) << msg;
    }
  }
}

}  // namespace
}  // namespace lmtrain::data
