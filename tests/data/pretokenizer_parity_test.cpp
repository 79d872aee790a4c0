// Split pre-tokenizer regexes against Hugging Face `tokenizers` (issue 38, item 3): the pieces
// lmtrain's Pretokenizer cuts must be the ones `tokenizers`' Split(Regex, Isolated) cuts, for
// patterns built on \w \W \s \S \b \p{L} \p{N}, over text where PCRE2's and Oniguruma's Unicode
// classes used to part: combining marks, variation selectors, ZWJ emoji sequences, CJK, Indic
// scripts with spacing marks, Latin-1 superscripts and fractions, letter-like numbers.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "data/pretokenizer.h"
#include "test_util.h"

namespace lmtrain::data {
namespace {

using testing::TempDir;

std::string unicode_class_text() {
  return "cafe\xCC\x81 Ame\xCC\x81lie Z\xCC\x87\xCC\x8C na\xC3\xAFve\n"  // U+0301 etc.
         "\xE2\x9D\xA4\xEF\xB8\x8F love \xE2\x98\x80\xEF\xB8\x8E sun\n"  // U+FE0F, U+FE0E
         "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7 "  // ZWJ family
         "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD \xF0\x9F\x87\xAB\xF0\x9F\x87\xB7\n"        // skin, flag
         "\xE4\xB8\xAD\xE6\x96\x87\xE6\xB5\x8B\xE8\xAF\x95\xE3\x80\x80\xE6\x97\xA5\xE6\x9C\xAC "
         "\xE3\x81\xB2\xE3\x82\x89\xE3\x81\x8C\xE3\x81\xAA\xE3\x83\xBC\n"  // CJK, U+3000
         "\xE0\xA4\xB9\xE0\xA4\xBF\xE0\xA4\x82\xE0\xA4\xA6\xE0\xA5\x80 "   // Hindi
         "\xE0\xAE\xA4\xE0\xAE\xAE\xE0\xAE\xBF\xE0\xAE\xB4\xE0\xAF\x8D "   // Tamil
         "\xE0\xA6\xAC\xE0\xA6\xBE\xE0\xA6\x82\xE0\xA6\xB2\xE0\xA6\xBE "   // Bengali
         "\xE0\xB9\x84\xE0\xB8\x97\xE0\xB8\xA2\n"                          // Thai
         "x\xC2\xB2 \xC2\xBD \xE2\x85\xAB \xE2\x91\xA0 \xE2\x92\xB6 \xD9\xA3\xD9\xA4 "  // ² ½ Ⅻ ① Ⓐ
                                                                                        // ٣٤
         "snake_case a\xE2\x80\xBF"
         "b it's 42nd\n"  // ‿ (Pc)
         "a\xC2\xA0"
         "b c\xE1\xA0\x8E"
         "d e\xE2\x80\x8B"
         "f g\xE2\x80\xA8h\t \r\n";  // NBSP U+180E ZWSP
}

TEST(PretokenizerParity, SplitPatternsWithUnicodeClassesCutWhereTokenizersCuts) {
  const std::vector<std::string> patterns = {
      R"(\w+)",
      R"(\W+)",
      R"([\w']+|[^\w\s]+|\s+)",
      R"(\w+\b|\B\W)",
      R"([^\W\d]+|\d+)",
      R"([^\S\n]+|\n)",
      R"([a-z\W]+)",
      R"(\p{L}+)",
      R"(\p{N}+)",
      R"(\s+(?!\S)|\s+)",
      R"( ?[^\s\p{L}\p{N}]+)",
      kGpt2Pattern,
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|)"
      R"(\s*[\r\n]+|\s+(?!\S)|\s+)",
  };
  TempDir dir("lmtrain_split_parity");
  const std::string text = unicode_class_text();
  testing::write_text(dir.file("text.txt"), text);
  testing::write_text(dir.file("patterns.json"), nlohmann::json(patterns).dump());
  const auto r =
      testing::run_hf_check("split " + dir.file("patterns.json") + " " + dir.file("text.txt"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json want = testing::check_result(r);
  for (const std::string& pattern : patterns) {
    std::vector<size_t> got;
    for (std::string_view piece : Pretokenizer(pattern).split(text)) got.push_back(piece.size());
    EXPECT_EQ(got, want.at(pattern).get<std::vector<size_t>>()) << "pattern " << pattern;
  }
}

}  // namespace
}  // namespace lmtrain::data
