// Chat evaluations of a chat model (nanochat's chat_eval, ChatCORE): tasks from the user's JSONL
// files (HF datasets saved as JSONL), listed in a YAML file:
//
//   chat_tasks:
//   - {label: arc_easy, type: multiple_choice, dataset: arc_easy.jsonl}
//   - {label: gsm8k, type: gsm8k, dataset: gsm8k.jsonl, max_new_tokens: 256}
//
//   multiple_choice  {"question", "choices": [...] or {"text": [...], "label": [...]},
//                    "answer": index | "answerKey": letter}  (MMLU's and ARC's shapes)
//                    The user asks "Multiple Choice question: Q\n- CHOICE=A\n...\nRespond only
//                    with the letter of the correct answer." (nanochat's render_mc); the answer
//                    is the letter whose token has the highest logit at the assistant's first
//                    position, among the choices' letters.
//   gsm8k            {"question", "answer": "... #### 42"}: the model answers greedily (up to
//                    max_new_tokens, default 256, or its end token); right when the number after
//                    its "#### " equals the reference's (commas removed).
//
// Accuracy per task, centered against chance (multiple choice: the mean of 1 / choices;
// generative: 0; or the task's random_baseline, a fraction), and ChatCORE: their mean.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/chat/chat_render.h"
#include "eval/item_shard.h"
#include "model/gpt.h"

namespace lmtrain::eval {

enum class ChatTaskType { kMultipleChoice, kGsm8k };

struct ChatItem {
  std::string question;
  std::vector<std::string> choices, letters;  // multiple choice
  int64_t gold = 0;                           // multiple choice: index of the answer
  std::string reference;                      // gsm8k: the reference's number
};

struct ChatTask {
  std::string label, path;
  ChatTaskType type = ChatTaskType::kMultipleChoice;
  int64_t max_new_tokens = 256;
  std::optional<double> random_baseline;
  std::vector<ChatItem> items;
};

// Throws UsageError naming the file (and line) and what is wrong.
std::vector<ChatTask> read_chat_tasks(const std::string& yaml_path);

// The number after "#### " (GSM8K's answer line), commas removed; nullopt when there is none.
std::optional<std::string> gsm8k_number(const std::string& text);
// The user's message of a multiple-choice item (nanochat's render_mc).
std::string render_multiple_choice(const ChatItem& item);

struct ChatItemScore {
  bool correct = false;
  std::string answer;  // the letter picked, or the generated text
};
struct ChatTaskScore {
  std::string label;
  double accuracy = 0, baseline = 0, centered = 0;
  std::vector<ChatItemScore> scores;
};

// shard: score only its items (see core_eval.h's score_task; then finish_chat_task_score).
ChatTaskScore score_chat_task(model::GptImpl& model, const data::chat::ChatRenderer& renderer,
                              const data::BpeTokenizer& tok, const ChatTask& task,
                              int64_t max_items, const ItemShard& shard = {});
// accuracy and centered from scores and baseline (every item scored).
void finish_chat_task_score(ChatTaskScore& ts);

}  // namespace lmtrain::eval
