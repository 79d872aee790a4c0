// Scoring CORE tasks (core_tasks.h) with a model, as nanochat's core_eval.py does: each item's
// rows (its choices, or context + continuation) in one batch padded on the right with the BOS
// token; multiple choice and schema pick the row whose scored tokens have the lowest mean
// cross-entropy (the first on a tie), language modeling is right when the argmax at every
// scored position is the next token. A task's accuracy is centered against its random
// baseline: (acc - b/100) / (1 - b/100); CORE is the mean of the centered accuracies.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/bpe_tokenizer.h"
#include "eval/core_tasks.h"
#include "eval/item_shard.h"
#include "model/gpt.h"

namespace lmtrain::eval {

struct ItemScore {
  bool correct = false;
  int64_t pred = 0;                 // mc / schema: the row picked
  std::vector<double> mean_losses;  // mc / schema: per row
};

struct TaskScore {
  std::string label;
  double accuracy = 0, centered = 0, random_baseline = 0;
  int64_t items = 0;
  std::vector<ItemScore> scores;  // in the (shuffled) order visited
};

struct CoreScore {
  std::vector<TaskScore> tasks;
  double core = 0;  // mean of the tasks' centered accuracies
};

// `tasks` already shuffled (shuffle_items). max_len: the model's longest input. shard: score
// only its items (the others' scores stay default, and the accuracy counts only the scored:
// finish_task_score after the ranks' scores are summed).
TaskScore score_task(model::GptImpl& model, const data::BpeTokenizer& tok, const CoreTask& task,
                     int64_t max_len, const ItemShard& shard = {});
// accuracy and centered from scores (every item scored).
void finish_task_score(TaskScore& ts);
CoreScore score_core(model::GptImpl& model, const data::BpeTokenizer& tok,
                     const std::vector<CoreTask>& tasks, int64_t max_len);

}  // namespace lmtrain::eval
