#include "data/pretokenizer.h"

#include <gtest/gtest.h>

#include <random>

#include "core/error.h"

namespace lmtrain::data {
namespace {

using Pieces = std::vector<std::string>;

Pieces split(std::string_view text) {
  static const Pretokenizer pretok;
  Pieces out;
  for (std::string_view p : pretok.split(text)) out.emplace_back(p);
  return out;
}

TEST(PretokenizerTest, SplitsLikeGpt2) {
  EXPECT_EQ(split("Hello world's 123 !!"), (Pieces{"Hello", " world", "'s", " 123", " !!"}));
  EXPECT_EQ(split("don't I'm we'll"), (Pieces{"don", "'t", " I", "'m", " we", "'ll"}));
  // Contractions are case-sensitive, as in GPT-2.
  EXPECT_EQ(split("IT'S"), (Pieces{"IT", "'", "S"}));
  EXPECT_EQ(split("x=1+22;"), (Pieces{"x", "=", "1", "+", "22", ";"}));
  EXPECT_EQ(split(""), Pieces{});
}

TEST(PretokenizerTest, WhitespaceRules) {
  // The last space of a run attaches to the next word; the others stand alone.
  EXPECT_EQ(split("a  b"), (Pieces{"a", " ", " b"}));
  EXPECT_EQ(split("  hello"), (Pieces{" ", " hello"}));
  EXPECT_EQ(split("a \n b"), (Pieces{"a", " \n", " b"}));
  // Newlines before a word split one by one (GPT-2 encodes "a\n\nb" as 64, 198, 198, 65) ...
  EXPECT_EQ(split("a\n\nb"), (Pieces{"a", "\n", "\n", "b"}));
  // ... while trailing whitespace stays one piece.
  EXPECT_EQ(split("a\n\n"), (Pieces{"a", "\n\n"}));
  EXPECT_EQ(split("end.   "), (Pieces{"end", ".", "   "}));
  EXPECT_EQ(split("\ttab"), (Pieces{"\t", "tab"}));
}

TEST(PretokenizerTest, UnicodeLettersAndNumbers) {
  EXPECT_EQ(split("h\xC3\xA9llo w\xC3\xB6rld"), (Pieces{"h\xC3\xA9llo", " w\xC3\xB6rld"}));
  EXPECT_EQ(split("\xE6\x97\xA5\xE6\x9C\xAC"), (Pieces{"\xE6\x97\xA5\xE6\x9C\xAC"}));  // 日本
  EXPECT_EQ(split("x\xC2\xB2"), (Pieces{"x", "\xC2\xB2"}));  // '²' is a number
  // U+00A0 (no-break space) is Unicode whitespace.
  EXPECT_EQ(split("a\xC2\xA0"
                  "b"),
            (Pieces{"a", "\xC2\xA0", "b"}));
}

TEST(PretokenizerTest, InvalidUtf8BytesBecomeTheirOwnPieces) {
  EXPECT_EQ(split("ab\xFF\xFE"
                  "cd"),
            (Pieces{"ab", "\xFF\xFE", "cd"}));
  EXPECT_EQ(split("\x80"), (Pieces{"\x80"}));
  EXPECT_EQ(split(std::string("a\0b", 3)), (Pieces{"a", std::string(1, '\0'), "b"}));
  // A truncated multi-byte sequence at the end.
  EXPECT_EQ(split("hi \xE6\x97"), (Pieces{"hi", " ", "\xE6\x97"}));
}

TEST(PretokenizerTest, CoversArbitraryBytes) {
  const Pretokenizer pretok;
  std::mt19937 rng(42);
  const std::vector<std::string> alphabet = {
      "a", "Z", " ", "\n", "'", "s", "7", "!", "\xC3\xA9", "\xE6\x97\xA5", "\xF0\x9F\x98\x80"};
  for (int iter = 0; iter < 300; ++iter) {
    std::string text;
    const int len = rng() % 200;
    for (int i = 0; i < len; ++i) {
      if (rng() % 3 == 0) {
        text.push_back(static_cast<char>(rng() % 256));  // random byte, often invalid UTF-8
      } else {
        text += alphabet[rng() % alphabet.size()];
      }
    }
    std::string joined;
    for (std::string_view p : pretok.split(text)) {
      ASSERT_FALSE(p.empty());
      joined.append(p);
    }
    ASSERT_EQ(joined, text) << "iteration " << iter;
  }
}

TEST(PretokenizerTest, LongRunsDoNotFail) {
  const Pretokenizer pretok;
  const std::string spaces = std::string(1 << 20, ' ') + "x";
  EXPECT_EQ(pretok.split(spaces).size(), 2u);  // all but one space, then " x"
  const std::string letters(1 << 20, 'a');
  EXPECT_EQ(pretok.split(letters).size(), 1u);
}

TEST(PretokenizerTest, BadPatternsAreErrors) {
  EXPECT_THROW(Pretokenizer("(unclosed"), Error);
  EXPECT_THROW(Pretokenizer("a*"), Error);    // can match the empty string
  EXPECT_THROW(Pretokenizer("[\\w"), Error);  // unclosed, even once \w is spelled out
}

}  // namespace
}  // namespace lmtrain::data
