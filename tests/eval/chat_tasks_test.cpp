#include "eval/chat_tasks.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "eval/core_tasks.h"
#include "test_util.h"

namespace lmtrain::eval {
namespace {

TEST(ChatTasks, Gsm8kNumberIsTheOneAfterTheMarks) {
  EXPECT_EQ(gsm8k_number("so 6 * 7 = 42\n#### 42"), "42");
  EXPECT_EQ(gsm8k_number("#### 1,234.5 apples"), "1234.5");
  EXPECT_EQ(gsm8k_number("#### -3"), "-3");
  EXPECT_EQ(gsm8k_number("#### x then #### 7"), "7");
  EXPECT_FALSE(gsm8k_number("the answer is 42").has_value());
  EXPECT_FALSE(gsm8k_number("#### -").has_value());
}

TEST(ChatTasks, MultipleChoiceIsAskedAsNanochatAsks) {
  ChatItem it;
  it.question = "2+2?";
  it.choices = {"3", "4"};
  it.letters = {"A", "B"};
  EXPECT_EQ(render_multiple_choice(it),
            "Multiple Choice question: 2+2?\n- 3=A\n- 4=B\n\nRespond only with the letter of the "
            "correct answer.");
}

TEST(ChatTasks, ReadsArcAndMmluShapesAndRefusesBadOnes) {
  lmtrain::testing::TempDir dir("chat_tasks");
  lmtrain::testing::write_text(
      dir.file("t.yaml"), "chat_tasks:\n- {label: arc, type: multiple_choice, dataset: a.jsonl}\n");
  lmtrain::testing::write_text(
      dir.file("a.jsonl"),
      R"({"question": "q", "choices": {"text": ["x", "y", "z"], "label": ["1", "2", "3"]}, "answerKey": "3"})"
      "\n"
      R"({"question": "q", "choices": ["x", "y"], "answer": 1})"
      "\n");
  const auto tasks = read_chat_tasks(dir.file("t.yaml"));
  ASSERT_EQ(tasks.size(), 1u);
  ASSERT_EQ(tasks[0].items.size(), 2u);
  EXPECT_EQ(tasks[0].items[0].gold, 2);
  EXPECT_EQ(tasks[0].items[0].letters, (std::vector<std::string>{"1", "2", "3"}));
  EXPECT_EQ(tasks[0].items[1].letters, (std::vector<std::string>{"A", "B"}));
  lmtrain::testing::write_text(dir.file("a.jsonl"),
                               R"({"question": "q", "choices": ["x"], "answer": 0})"
                               "\n");
  try {
    read_chat_tasks(dir.file("t.yaml"));
    FAIL() << "one choice was accepted";
  } catch (const UsageError& e) {
    EXPECT_TRUE(lmtrain::testing::contains(e.what(), "a.jsonl:1")) << e.what();
  }
}

TEST(CoreTasks, PromptsAreTheBundlesFormats) {
  CoreTask t;
  t.type = TaskType::kMultipleChoice;
  t.num_fewshot = 1;
  t.items = {{"Q0", "", "", {"a", "b"}, 1}, {"Q1", "", "", {"c", "d"}, 0}};
  // Item 1's one example is item 0 (the only other), with its gold choice.
  EXPECT_EQ(render_prompts(t, 1), (std::vector<std::string>{"Q0 b\n\nQ1 c", "Q0 b\n\nQ1 d"}));
  t.type = TaskType::kLanguageModeling;
  t.num_fewshot = 0;
  t.delimiter = " ";
  t.items = {{"", " ctx  ", "cont", {}, 0}, {"", "x", "y", {}, 0}};
  // The context is trimmed; the prompt without the continuation is stripped too.
  EXPECT_EQ(render_prompts(t, 0), (std::vector<std::string>{"ctx", "ctx cont"}));
}

}  // namespace
}  // namespace lmtrain::eval
