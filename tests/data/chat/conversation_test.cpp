#include "data/chat/conversation.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "test_util.h"

namespace lmtrain::data::chat {
namespace {

using lmtrain::testing::TempDir;

TEST(Conversation, ReadsMessagesPartsAndReasoning) {
  const auto c = conversation_from_jsonl(
      R"({"id": 3, "messages": [{"role": "system", "content": "be brief"},
          {"role": "user", "content": "2+2?"},
          {"role": "assistant", "content": [{"type": "python", "text": "2+2"},
                                            {"type": "python_output", "text": "4"},
                                            {"type": "text", "text": "4"}]},
          {"role": "assistant", "content": "", "reasoning_content": "easy"}]})",
      "f:1");
  ASSERT_EQ(c.messages.size(), 4u);
  EXPECT_EQ(c.messages[0].role, Role::kSystem);
  EXPECT_EQ(c.messages[1].content, "2+2?");
  ASSERT_EQ(c.messages[2].parts.size(), 3u);
  EXPECT_EQ(c.messages[2].parts[1].kind, PartKind::kPythonOutput);
  EXPECT_EQ(c.messages[2].content, "2+244");
  EXPECT_TRUE(c.messages[3].has_reasoning);
  EXPECT_EQ(c.messages[3].reasoning, "easy");
  EXPECT_EQ(conversation_from_jsonl(conversation_to_jsonl(c), "back"), c);
}

TEST(Conversation, RefusesBadShapesNamingTheLine) {
  const std::vector<std::string> bad = {
      R"({"messages": []})",
      R"({"conversation": []})",
      R"({"messages": [{"role": "tool", "content": "x"}]})",
      R"({"messages": [{"role": "user"}]})",
      R"({"messages": [{"role": "user", "content": 3}]})",
      R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}]})",
      R"({"messages": [{"role": "assistant", "content": [{"type": "image", "text": "x"}]}]})",
      R"({"messages": [{"role": "user", "content": "a", "role": "user"}]})",
      R"([1, 2])",
      R"({"messages": [{"role": "user", "content": "x")",
  };
  for (const auto& line : bad) {
    try {
      conversation_from_jsonl(line, "data.jsonl:7");
      ADD_FAILURE() << "accepted: " << line;
    } catch (const Error& e) {  // bad data (exit 1), not a usage error
      EXPECT_EQ(dynamic_cast<const UsageError*>(&e), nullptr) << e.what();
      EXPECT_NE(std::string(e.what()).find("data.jsonl:7"), std::string::npos) << e.what();
    }
  }
}

TEST(Conversation, ReadsAFileSkippingBlankLines) {
  TempDir dir("conversation");
  lmtrain::testing::write_text(dir.file("c.jsonl"),
                               "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}]}\n\n  \n"
                               "{\"messages\": [{\"role\": \"user\", \"content\": \"b\"}]}\n"
                               "{\"messages\": [{\"role\": \"robot\", \"content\": \"c\"}]}\n");
  std::vector<uint64_t> lines;
  try {
    for_each_conversation(dir.file("c.jsonl"), 1 << 20,
                          [&](Conversation&&, uint64_t line) { lines.push_back(line); });
    FAIL() << "the robot's line was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(dynamic_cast<const UsageError*>(&e), nullptr) << e.what();
    EXPECT_NE(std::string(e.what()).find("c.jsonl:5"), std::string::npos) << e.what();
  }
  EXPECT_EQ(lines, (std::vector<uint64_t>{1, 4}));
  EXPECT_THROW(
      for_each_conversation(dir.file("missing.jsonl"), 1 << 20, [](Conversation&&, uint64_t) {}),
      UsageError);
}

}  // namespace
}  // namespace lmtrain::data::chat
