// CORE-style in-context tasks in the DCLM eval bundle's format (the bundle nanochat's base_eval
// reads; DCLM paper, arXiv:2406.11794), read from the user's files:
//
//   BUNDLE/core.yaml           icl_tasks: [{label, dataset_uri, num_fewshot: [k],
//                              icl_task_type: multiple_choice | schema | language_modeling,
//                              continuation_delimiter (default " ")}, ...]
//   BUNDLE/eval_meta_data.csv  "Eval Task" -> "Random baseline" (percent), for centering
//   BUNDLE/eval_data/URI       one JSON item per line:
//                                multiple_choice {"query", "choices": [...], "gold": i}
//                                schema          {"context_options": [...], "continuation", "gold":
//                                i} language_modeling {"context", "continuation"}
//
// A task's prompts are nanochat's (core_eval.py): few-shot examples (k others of the task,
// random.Random(1234 + item).sample) then the item, joined by continuation_delimiter, examples
// separated by a blank line; the items are visited in random.Random(1337)'s shuffle.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/bpe_tokenizer.h"

namespace lmtrain::eval {

enum class TaskType { kMultipleChoice, kSchema, kLanguageModeling };
const char* task_type_name(TaskType t);

struct TaskItem {
  std::string query, context, continuation;  // by type: query (mc), context (lm), continuation
  std::vector<std::string> choices;          // mc: choices; schema: context_options
  int64_t gold = 0;
};

struct CoreTask {
  std::string label;
  TaskType type = TaskType::kMultipleChoice;
  int64_t num_fewshot = 0;
  std::string delimiter = " ";
  double random_baseline = 0;   // percent
  std::string path;             // the items' file
  std::vector<TaskItem> items;  // in file order
};

// The tasks of BUNDLE/core.yaml (a directory) or of a task-list YAML file (its eval_data/ and
// eval_meta_data.csv beside it). Throws UsageError naming the file, line and what is wrong.
std::vector<CoreTask> read_core_tasks(const std::string& dir_or_file);

// One item's scoring rows: token sequences (BOS first) and, per row, the [start, end) of the
// tokens whose loss (or argmax) decides it.
struct ScoringRows {
  std::vector<std::vector<int64_t>> tokens;
  std::vector<int64_t> start, end;
};

// The prompts of item `index` of `task` (its few-shot examples drawn from the other items),
// nanochat's render_prompts_*.
std::vector<std::string> render_prompts(const CoreTask& task, int64_t index);
// Their tokens with `bos` first, cut to the last `max_len` tokens when longer, and the spans to
// score. Throws Error naming the task when a language-modeling item's context is not a token
// prefix of context + continuation.
ScoringRows scoring_rows(const CoreTask& task, int64_t index, const data::BpeTokenizer& tok,
                         int64_t bos, int64_t max_len);

// The items as nanochat visits them: random.Random(1337).shuffle of the list, cut to the first
// max_items (<= 0: all). Few-shot examples are drawn from this list.
void shuffle_items(CoreTask& task, int64_t max_items);

// The token that starts every scored sequence: <|bos|> (nanochat), <|begin_of_text|> (Llama 3),
// else the end-of-text token that separates documents.
int64_t bos_token(const data::BpeTokenizer& tok);

}  // namespace lmtrain::eval
