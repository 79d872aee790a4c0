// Chat rendering against transformers' apply_chat_template (ChatML as Qwen2.5 and plain, Qwen3
// with thinking, Llama 3) and against a Python transcription of nanochat's
// render_conversation, on 200 generated conversations each (tests/fixtures/chat_check.py):
// the ids token for token and the loss masks.
#include "data/chat/chat_render.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/chat/chat_format.h"
#include "data/chat/conversation.h"
#include "test_util.h"

namespace lmtrain::data::chat {
namespace {

using lmtrain::testing::TempDir;

struct Expected {
  std::vector<uint32_t> ids;
  std::vector<uint8_t> mask;
};

std::vector<Expected> read_expected(const std::string& path) {
  std::vector<Expected> out;
  const std::string text = lmtrain::testing::read_text(path);
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const auto j = nlohmann::json::parse(text.substr(pos, end - pos));
    out.push_back(
        {j.at("ids").get<std::vector<uint32_t>>(), j.at("mask").get<std::vector<uint8_t>>()});
    pos = end + 1;
  }
  return out;
}

// Runs the reference for `format`, renders its conversations with lmtrain and compares. The
// Hugging Face formats are found from the written tokenizer_config.json, as an imported model's.
void check_format(const std::string& format, ChatFormatKind kind, const std::string& system) {
  TempDir dir("chat_render");
  const std::string out = dir.file(format);
  const auto r = lmtrain::testing::run_command(
      lmtrain::testing::lmtrain_python() + " " + lmtrain::testing::source_dir() +
      "/tests/fixtures/chat_check.py render " + format + " " + out + " --count 200 --seed 7");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto summary = lmtrain::testing::check_result(r);
  const auto tok = BpeTokenizer::load_hf(out + "/tokenizer.json");
  const ChatFormat fmt = format == "nanochat"
                             ? *chat_format_from_name("nanochat")
                             : chat_format_from_tokenizer_config(out + "/tokenizer_config.json",
                                                                 "test model " + format);
  EXPECT_EQ(fmt.kind, kind);
  EXPECT_EQ(fmt.default_system, system);
  const ChatRenderer renderer(fmt, tok, out + "/tokenizer.json");
  const auto expected = read_expected(out + "/expected.jsonl");
  ASSERT_EQ(expected.size(), 200u);
  size_t n = 0;
  int64_t tokens = 0, targets = 0, with_targets = 0;
  for_each_conversation(
      out + "/conversations.jsonl", 1 << 20, [&](Conversation&& c, uint64_t line) {
        ASSERT_LT(n, expected.size());
        const auto got = renderer.render(c, "line " + std::to_string(line));
        const auto& want = expected[n++];
        ASSERT_EQ(got.ids, want.ids)
            << format << " conversation " << line << ": " << conversation_to_jsonl(c);
        ASSERT_EQ(got.mask, want.mask)
            << format << " conversation " << line << ": " << conversation_to_jsonl(c);
        tokens += static_cast<int64_t>(got.ids.size());
        targets += got.targets();
        with_targets += got.targets() > 0;
      });
  EXPECT_EQ(n, 200u);
  EXPECT_EQ(tokens, summary.at("tokens").get<int64_t>());
  EXPECT_EQ(targets, summary.at("targets").get<int64_t>());
  // Not a vacuous comparison: most conversations train on something, and most tokens do not.
  EXPECT_GT(with_targets, 150);
  EXPECT_GT(targets, tokens / 10);
  EXPECT_LT(targets, tokens * 6 / 10);
}

TEST(ChatRender, ChatmlEqualsApplyChatTemplate) {
  check_format("chatml", ChatFormatKind::kChatml, "");
}

TEST(ChatRender, Qwen25EqualsApplyChatTemplate) {
  check_format("qwen2.5", ChatFormatKind::kChatml,
               "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
}

TEST(ChatRender, Qwen3ThinkingEqualsApplyChatTemplate) {
  check_format("qwen3", ChatFormatKind::kQwen3, "");
}

TEST(ChatRender, Llama3EqualsApplyChatTemplate) {
  check_format("llama3", ChatFormatKind::kLlama3, "");
}

TEST(ChatRender, NanochatEqualsReference) {
  check_format("nanochat", ChatFormatKind::kNanochat, "");
}

TEST(ChatRender, MaskIsTheAssistantsTokensAndEndToken) {
  // A tokenizer of bytes only, plus ChatML's tokens: every text byte is one token, so the mask
  // can be written out by hand.
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
  tokens.push_back("<|endoftext|>");
  tokens.push_back("<|im_start|>");
  tokens.push_back("<|im_end|>");
  const BpeTokenizer tok(tokens, {},
                         {{"<|endoftext|>", 256}, {"<|im_start|>", 257}, {"<|im_end|>", 258}});
  const ChatRenderer renderer(*chat_format_from_name("chatml"), tok, "bytes");
  const auto c = conversation_from_jsonl(
      R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})",
      "test");
  const auto r = renderer.render(c, "test");
  // <|im_start|> u s e r \n h i <|im_end|> \n <|im_start|> a s s i s t a n t \n y o <|im_end|> \n
  const std::vector<uint8_t> want = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                     0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0};
  EXPECT_EQ(r.mask, want);
  EXPECT_EQ(r.ids[23], 258u);
  EXPECT_EQ(r.targets(), 3);
}

TEST(ChatRender, RefusesWhatItCannotRender) {
  EXPECT_THROW(chat_format_from_template("{{ messages }}", "m"), UsageError);
  try {
    chat_format_from_template(
        "<|start_header_id|>{{ 'Cutting Knowledge Date: December 2023' "
        "}}<|end_header_id|><|eot_id|>",
        "meta-llama/Llama-3.1-8B-Instruct");
    FAIL() << "Llama 3.1's template was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("meta-llama/Llama-3.1-8B-Instruct"), std::string::npos);
  }
  // Two different default system prompts: which one applies cannot be read off the text.
  EXPECT_THROW(chat_format_from_template(
                   "<|im_start|>system\\nA<|im_end|> <|im_start|>system\\nB<|im_end|>", "m"),
               UsageError);
  // A tokenizer without the format's tokens.
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
  tokens.push_back("<|endoftext|>");
  const BpeTokenizer tok(tokens, {}, {{"<|endoftext|>", 256}});
  EXPECT_THROW(ChatRenderer(*chat_format_from_name("nanochat"), tok, "t"), UsageError);
}

TEST(ChatRender, PythonStripIsPythons) {
  EXPECT_EQ(python_strip(" \t\n a b \r\n"), "a b");
  EXPECT_EQ(python_strip("\u3000\u00a0x\u2029"), "x");
  EXPECT_EQ(python_strip("   "), "");
  EXPECT_EQ(python_strip("\u200bx"), "\u200bx");  // zero-width space is not whitespace in Python
}

}  // namespace
}  // namespace lmtrain::data::chat
