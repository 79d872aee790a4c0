#include "data/chat/conversation.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "data/corpus/corpus_test_util.h"
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

// Parquet conversations (a `messages` column of list<struct<role, content, reasoning_content>>,
// written by pyarrow in row groups of 2): the same conversations as the JSONL lines holding them,
// a null field read as an absent key, rows numbered from 1; a bad row and a file without the
// column are refused naming them.
TEST(Conversation, ReadsParquetMessagesAsTheJsonlLines) {
  LMTRAIN_SKIP_WITHOUT_PARQUET();
  TempDir dir("conversation_parquet");
  const std::string jsonl =
      "{\"messages\": [{\"role\": \"system\", \"content\": \"be brief\"}, "
      "{\"role\": \"user\", \"content\": \"hi \u00e9\"}, "
      "{\"role\": \"assistant\", \"content\": \"yo\", \"reasoning_content\": \"hm\"}]}\n"
      "{\"messages\": [{\"role\": \"user\", \"content\": \"2+2?\"}, "
      "{\"role\": \"assistant\", \"content\": \"4\"}]}\n"
      "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}\n";
  lmtrain::testing::write_text(dir.file("c.jsonl"), jsonl);
  lmtrain::testing::write_text(
      dir.file("w.py"),
      "import json, sys, pyarrow as pa, pyarrow.parquet as pq\n"
      "rows = [json.loads(l)['messages'] for l in open(sys.argv[1])]\n"
      "rows += [None]\n"  // a null row: no conversation
      "if len(sys.argv) > 3: rows.append([{'role': 'robot', 'content': 'c'}])\n"
      "m = pa.struct([('role', pa.string()), ('content', pa.string()),\n"
      "               ('reasoning_content', pa.string())])\n"
      "pq.write_table(pa.table({'id': list(range(len(rows))), 'messages': pa.array(rows, \n"
      "               pa.list_(m))}), sys.argv[2], row_group_size=2)\n");
  auto write = [&](const std::string& out, bool bad) {
    auto r =
        lmtrain::testing::run_command(lmtrain::testing::lmtrain_python() + " " + dir.file("w.py") +
                                      " " + dir.file("c.jsonl") + " " + out + (bad ? " bad" : ""));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  };
  write(dir.file("c.parquet"), false);
  std::vector<Conversation> from_jsonl, from_parquet;
  std::vector<uint64_t> rows;
  for_each_conversation(dir.file("c.jsonl"), 1 << 20,
                        [&](Conversation&& c, uint64_t) { from_jsonl.push_back(std::move(c)); });
  for_each_conversation(dir.file("c.parquet"), 1 << 20, [&](Conversation&& c, uint64_t row) {
    from_parquet.push_back(std::move(c));
    rows.push_back(row);
  });
  ASSERT_EQ(from_jsonl.size(), 3u);
  EXPECT_TRUE(from_parquet == from_jsonl);
  EXPECT_TRUE(from_parquet[0].messages[2].has_reasoning);
  EXPECT_FALSE(from_parquet[1].messages[1].has_reasoning);
  EXPECT_EQ(rows, (std::vector<uint64_t>{1, 2, 3}));
  write(dir.file("bad.parquet"), true);
  try {
    for_each_conversation(dir.file("bad.parquet"), 1 << 20, [](Conversation&&, uint64_t) {});
    FAIL() << "the robot's row was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.parquet: row 5"), std::string::npos) << e.what();
  }
  // A text corpus's parquet file has no `messages` column: its columns are named.
  lmtrain::testing::write_parquet(dir.file("text.parquet"), {std::string("a doc")}, 4);
  try {
    for_each_conversation(dir.file("text.parquet"), 1 << 20, [](Conversation&&, uint64_t) {});
    FAIL() << "a file without messages was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no column \"messages\""), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("text"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lmtrain::data::chat
