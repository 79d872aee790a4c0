#include "data/byte_level.h"

#include <gtest/gtest.h>

#include <set>

namespace lmtrain::data {
namespace {

TEST(TokenizerByteLevel, MappingIsABijectionOfAllBytes) {
  std::set<uint32_t> codepoints;
  for (int b = 0; b < 256; ++b) {
    const uint32_t cp = byte_to_codepoint(static_cast<uint8_t>(b));
    codepoints.insert(cp);
    EXPECT_EQ(codepoint_to_byte(cp), b) << "byte " << b;
  }
  EXPECT_EQ(codepoints.size(), 256u);
  EXPECT_EQ(codepoint_to_byte(0x20AC), -1);  // '€' is not in the alphabet
  EXPECT_EQ(codepoint_to_byte(0x20), -1);    // a raw space never appears in vocab strings
}

TEST(TokenizerByteLevel, KnownGpt2Values) {
  EXPECT_EQ(byte_to_codepoint('a'), static_cast<uint32_t>('a'));
  EXPECT_EQ(byte_to_codepoint(' '), 0x120u);   // 'Ġ'
  EXPECT_EQ(byte_to_codepoint('\n'), 0x10Au);  // 'Ċ'
  EXPECT_EQ(byte_to_codepoint(0), 0x100u);     // 'Ā'
  EXPECT_EQ(byte_to_codepoint(0xAD), 0x143u);  // soft hyphen is the last shifted byte
  // GPT-2 ids of single bytes follow this order: "!" = 0, "a" = 64, "Ġ" = 220, "Ċ" = 198.
  const auto& order = gpt2_byte_order();
  EXPECT_EQ(order[0], '!');
  EXPECT_EQ(order[64], 'a');
  EXPECT_EQ(order[220], ' ');
  EXPECT_EQ(order[198], '\n');
  EXPECT_EQ(std::set<uint8_t>(order.begin(), order.end()).size(), 256u);
}

TEST(TokenizerByteLevel, StringRoundTripOverAllBytes) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const std::string mapped = bytes_to_unicode(all);
  std::string back;
  ASSERT_TRUE(unicode_to_bytes(mapped, &back));
  EXPECT_EQ(back, all);
  EXPECT_EQ(bytes_to_unicode(" hi\n"), "\xC4\xA0hi\xC4\x8A");  // "Ġhi Ċ"
  EXPECT_FALSE(unicode_to_bytes("\xE2\x82\xAC", &back));       // '€'
  EXPECT_FALSE(unicode_to_bytes("\xC4", &back));               // truncated UTF-8
}

}  // namespace
}  // namespace lmtrain::data
