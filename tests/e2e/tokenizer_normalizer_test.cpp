// Tokenizer fidelity against Hugging Face `tokenizers` (project venv) for what real corpora bring
// (issue 28): the normalizers of real tokenizer.json files (NFC as in Qwen2/Qwen2.5, NFKC, NFD,
// NFKD, Lowercase, Strip, StripAccents, Replace, Prepend, Sequence), and Split + ByteLevel with
// add_prefix_space, which puts a space before every Split piece. Each variant of the fixture
// tokenizer (tests/fixtures/tokenizer) encodes a mixed-script text with NFD accents, fullwidth
// forms, ligatures, emoji ZWJ sequences, CJK, Arabic, Devanagari, combining marks and special
// tokens inside the text; `lmtrain tokenize` and `tokenizers` must give the same ids.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "test_util.h"

namespace lmtrain::testing {
namespace {

using nlohmann::json;

const char* kQwenSplit =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

std::string mixed_script_text() {
  std::string t;
  for (int i = 0; i < 3; ++i) {
    t += "cafe\xCC\x81 vs caf\xC3\xA9, Ame\xCC\x81lie; re\xCC\x81sume\xCC\x81 <|endoftext|>\n";
    t += "\xEF\xBC\xA6\xEF\xBD\x95\xEF\xBD\x8C\xEF\xBD\x8C\xEF\xBD\x97\xEF\xBD\x89\xEF\xBD\x84\xEF"
         "\xBD\x94\xEF\xBD\x88 \xEF\xAC\x81nance \xE2\x91\xA0\xE2\x91\xA1 x\xC2\xB2 \xE2\x84\xAB\n";
    t += "family \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7 flag "
         "\xF0\x9F\x87\xAB\xF0\x9F\x87\xB7 thumbs \xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD\n";
    t += "\xE4\xB8\xAD\xE6\x96\x87\xE6\xB5\x8B\xE8\xAF\x95 \xD8\xA7\xD9\x84\xD8\xB9\xD8\xB1\xD8\xA8"
         "\xD9\x8A\xD8\xA9 \xE0\xA4\xB9\xE0\xA4\xBF\xE0\xA4\x82\xE0\xA4\xA6\xE0\xA5\x80 "
         "\xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4 \xE1\x84\x92\xE1\x85\xA1\xE1\x86\xAB\n";
    t += "  Hello, WORLD!  It's 2026: \xCE\x91\xCE\xB8\xCE\xB7\xCE\xBD\xE1\xBF\xB6\xCE\xBD "
         "\xC3\x85ngstr\xC3\xB6m   \t tabs\n<|endoftext|>Z\xCC\x87\xCC\x8C  \n";
  }
  return t;
}

class TokenizerNormalizers : public ::testing::Test {
 protected:
  void SetUp() override {
    text_ = dir_.file("mixed.txt");
    write_text(text_, mixed_script_text());
    base_ = json::parse(read_text(source_dir() + "/tests/fixtures/tokenizer/tokenizer.json"));
    // The special token is matched on the raw text (normalized=false), as Qwen's are.
    for (auto& t : base_["added_tokens"]) t["normalized"] = false;
  }
  // A variant of the fixture with `normalizer` and `pre_tokenizer`; lmtrain's ids == tokenizers'.
  void expect_same_ids(const std::string& name, const json& normalizer, const json& pre) {
    json j = base_;
    j["normalizer"] = normalizer;
    j["pre_tokenizer"] = pre;
    const std::string tok = dir_.file(name + ".json");
    write_text(tok, j.dump(2));
    expect_same_ids_with(tok, name);
  }
  void expect_same_ids_with(const std::string& tok, const std::string& name) {
    const std::string py_ids = dir_.file(name + ".py"), lm_ids = dir_.file(name + ".lm");
    auto r = run_hf_check("tokenize " + tok + " " + text_ + " --out " + py_ids);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    auto t = run_command(lmtrain_binary() + " tokenize --tokenizer " + tok + " --input " + text_ +
                         " --output " + lm_ids);
    ASSERT_EQ(t.exit_code, 0) << t.output;
    EXPECT_EQ(read_text(lm_ids), read_text(py_ids)) << name;
  }
  json byte_level(bool prefix, bool regex) {
    return {{"type", "ByteLevel"},
            {"add_prefix_space", prefix},
            {"trim_offsets", true},
            {"use_regex", regex}};
  }
  json split_byte_level(bool prefix) {
    return {{"type", "Sequence"},
            {"pretokenizers",
             {{{"type", "Split"},
               {"pattern", {{"Regex", kQwenSplit}}},
               {"behavior", "Isolated"},
               {"invert", false}},
              byte_level(prefix, false)}}};
  }
  TempDir dir_{"lmtrain_tok_norm"};
  std::string text_;
  json base_;
};

TEST_F(TokenizerNormalizers, UnicodeNormalFormsMatchTokenizers) {
  for (const char* form : {"NFC", "NFD", "NFKC", "NFKD"}) {
    expect_same_ids(form, {{"type", form}}, split_byte_level(false));
  }
  // NFC is what Qwen2/Qwen2.5 use: the decomposed and precomposed "café" encode alike.
  auto nfc = json{{"type", "NFC"}};
  json j = base_;
  j["normalizer"] = nfc;
  write_text(dir_.file("nfc.json"), j.dump());
  write_text(dir_.file("a.txt"), "cafe\xCC\x81");
  write_text(dir_.file("b.txt"), "caf\xC3\xA9");
  auto a = run_command(lmtrain_binary() + " tokenize --tokenizer " + dir_.file("nfc.json") +
                       " --input " + dir_.file("a.txt"));
  auto b = run_command(lmtrain_binary() + " tokenize --tokenizer " + dir_.file("nfc.json") +
                       " --input " + dir_.file("b.txt"));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_EQ(a.output, b.output);
}

TEST_F(TokenizerNormalizers, SequencesOfTheOtherNormalizersMatchTokenizers) {
  expect_same_ids("lower_replace_prepend",
                  {{"type", "Sequence"},
                   {"normalizers",
                    {{{"type", "Lowercase"}},
                     {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "_"}},
                     {{"type", "Prepend"}, {"prepend", "_"}}}}},
                  byte_level(false, true));
  expect_same_ids("strip_accents",
                  {{"type", "Sequence"},
                   {"normalizers",
                    {{{"type", "NFD"}},
                     {{"type", "StripAccents"}},
                     {{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}}}}},
                  byte_level(false, true));
  expect_same_ids("replace_regex",
                  {{"type", "Replace"}, {"pattern", {{"Regex", "\\s+"}}}, {"content", " "}},
                  split_byte_level(false));
}

TEST_F(TokenizerNormalizers, SplitThenByteLevelAddsThePrefixSpacePerPiece) {
  expect_same_ids("split_prefix", nullptr, split_byte_level(true));
  expect_same_ids("bytelevel_prefix", nullptr, byte_level(true, true));
}

// A Split whose regex uses \w and \s (issue 38, item 3), behind a BPE that `tokenizers` trained
// with that Split, so its merges join letters with their combining marks and emoji with their
// variation selectors: lmtrain must cut the text where `tokenizers` does (Oniguruma's \w holds
// the marks; PCRE2's did not) to give the same ids.
TEST_F(TokenizerNormalizers, SplitWithWordAndSpaceClassesMatchesTokenizersOnMarks) {
  std::string more;
  for (int i = 0; i < 3; ++i) {
    more +=
        "\xE2\x9D\xA4\xEF\xB8\x8F love \xE2\x98\x80\xEF\xB8\x8E sun x\xC2\xB2 \xC2\xBD "
        "\xE2\x85\xAB \xE2\x92\xB6 snake_case a\xE2\x80\xBF"
        "b\n\xE0\xAE\xA4\xE0\xAE\xAE\xE0\xAE\xBF\xE0\xAE\xB4\xE0\xAF\x8D "
        "\xE0\xA6\xAC\xE0\xA6\xBE\xE0\xA6\x82\xE0\xA6\xB2\xE0\xA6\xBE c\xE1\xA0\x8E"
        "d\n";
  }
  write_text(text_, read_text(text_) + more);
  const std::string tok = dir_.file("split_w.json");
  auto r = run_hf_check("train-tokenizer " + text_ + " " + tok +
                        " --vocab-size 400 --split '\\w+|[^\\w\\s]+|\\s+'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_TRUE(contains(read_text(tok), "\"Split\"")) << read_text(tok);
  expect_same_ids_with(tok, "split_w");
}

TEST_F(TokenizerNormalizers, UnsupportedNormalizerIsAnErrorNamingIt) {
  json j = base_;
  j["normalizer"] = {{"type", "BertNormalizer"}, {"lowercase", true}};
  write_text(dir_.file("bert.json"), j.dump());
  auto r = run_command(lmtrain_binary() + " tokenize --tokenizer " + dir_.file("bert.json") +
                       " --input " + text_);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "normalizer type 'BertNormalizer' is not supported")) << r.output;
  EXPECT_TRUE(contains(r.output, dir_.file("bert.json"))) << r.output;
}

}  // namespace
}  // namespace lmtrain::testing
