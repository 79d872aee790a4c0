#include "eval/core_eval.h"

#include <torch/torch.h>

#include <limits>

namespace lmtrain::eval {

TaskScore score_task(model::GptImpl& model, const data::BpeTokenizer& tok, const CoreTask& task,
                     int64_t max_len, const ItemShard& shard) {
  torch::NoGradGuard no_grad;
  const int64_t bos = bos_token(tok);
  const auto device = model.parameters().front().device();
  TaskScore ts;
  ts.label = task.label;
  ts.random_baseline = task.random_baseline;
  for (int64_t i = 0; i < static_cast<int64_t>(task.items.size()); ++i) {
    if (!shard.owns(i)) {
      ts.scores.emplace_back();
      continue;
    }
    const ScoringRows rows = scoring_rows(task, i, tok, bos, max_len);
    const auto B = static_cast<int64_t>(rows.tokens.size());
    int64_t T = 0;
    for (const auto& t : rows.tokens) T = std::max<int64_t>(T, static_cast<int64_t>(t.size()));
    auto ids = torch::full({B, T}, bos, torch::kLong);  // (B, T), padded with BOS as nanochat
    for (int64_t b = 0; b < B; ++b) {
      const auto& t = rows.tokens[static_cast<size_t>(b)];
      ids[b]
          .narrow(0, 0, static_cast<int64_t>(t.size()))
          .copy_(torch::tensor(std::vector<int64_t>(t.begin(), t.end()), torch::kLong));
    }
    const auto logits = model.forward(ids.to(device)).to(torch::kFloat).cpu();  // (B, T, V)
    // losses[b, j] = CE of predicting ids[b, j + 1] at position j (the last column unused).
    const auto targets = torch::roll(ids, -1, 1);
    const auto losses =
        torch::nn::functional::cross_entropy(
            logits.reshape({B * T, -1}), targets.reshape({B * T}),
            torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone))
            .reshape({B, T});
    ItemScore s;
    const TaskItem& item = task.items[static_cast<size_t>(i)];
    if (task.type == TaskType::kLanguageModeling) {
      const int64_t si = rows.start[0], ei = rows.end[0];
      const auto pred = logits[0].argmax(-1).narrow(0, si - 1, ei - si);
      s.correct = torch::equal(pred, ids[0].narrow(0, si, ei - si));
    } else {
      double best = std::numeric_limits<double>::infinity();
      for (int64_t b = 0; b < B; ++b) {
        const int64_t si = rows.start[static_cast<size_t>(b)],
                      ei = rows.end[static_cast<size_t>(b)];
        const double m = losses[b].narrow(0, si - 1, ei - si).mean().item<double>();
        s.mean_losses.push_back(m);
        if (m < best) {  // strict: the first of equal losses wins, as Python's list.index(min)
          best = m;
          s.pred = b;
        }
      }
      s.correct = s.pred == item.gold;
    }
    ts.scores.push_back(std::move(s));
  }
  ts.items = static_cast<int64_t>(task.items.size());
  finish_task_score(ts);
  return ts;
}

void finish_task_score(TaskScore& ts) {
  int64_t correct = 0;
  for (const auto& s : ts.scores) correct += s.correct;
  ts.accuracy = static_cast<double>(correct) / static_cast<double>(ts.items);
  const double b = 0.01 * ts.random_baseline;
  ts.centered = (ts.accuracy - b) / (1.0 - b);
}

CoreScore score_core(model::GptImpl& model, const data::BpeTokenizer& tok,
                     const std::vector<CoreTask>& tasks, int64_t max_len) {
  CoreScore cs;
  for (const auto& t : tasks) {
    cs.tasks.push_back(score_task(model, tok, t, max_len));
    cs.core += cs.tasks.back().centered;
  }
  cs.core /= static_cast<double>(cs.tasks.size());
  return cs;
}

}  // namespace lmtrain::eval
