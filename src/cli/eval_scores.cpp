#include "cli/eval_scores.h"

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/chat_model.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/progress.h"
#include "data/chat/chat_format.h"
#include "data/chat/chat_render.h"
#include "data/token_split.h"
#include "eval/bpb.h"
#include "eval/chat_tasks.h"
#include "eval/core_eval.h"

namespace lmtrain::cli {

// --bpb: bits per byte on the token split (or --text FILE), eval/bpb.h.
int eval_bpb(const ParsedArgs& args, train::InferenceModel& loaded, const core::Config& cfg,
             const std::string& split, EvalRanks& ranks) {
  const int64_t T = cfg.get_int("data.seq_len");
  const int64_t B = args.get_int("batch_size", cfg.get_int("train.micro_batch_size"));
  if (B < 1) throw UsageError("--batch_size must be >= 1");
  const int64_t batches = args.get_int("batches", 0);
  std::vector<int64_t> tokens;
  std::string what;
  if (args.has("text")) {
    what = args.get("text");
    for (uint32_t id : loaded.tokenizer->encode(core::read_file(what))) tokens.push_back(id);
  } else {
    const std::string data_dir =
        args.get("data_dir", args.get("data.dir", cfg.get_string("data.dir")));
    if (data_dir.empty()) {
      throw UsageError(
          "--bpb: give --text FILE or --data.dir DIR (the checkpoint records no "
          "data.dir)");
    }
    auto shard = data::TokenSplit::open(data_dir, split);
    if (shard.tokenizer_hash() != loaded.tokenizer->hash()) {
      throw UsageError(shard.path() +
                       " was tokenized with a different tokenizer than the "
                       "checkpoint's");
    }
    what = shard.path();
    tokens = eval::split_tokens(shard, batches > 0 ? batches * B * T + 1 : 0);
  }
  loaded.model->eval();
  auto r = eval::bits_per_byte(*loaded.model, *loaded.tokenizer, tokens, T, B,
                               batches > 0 ? batches * B : 0, ranks.shard);
  sum_over_ranks(r, *ranks.group);
  if (!ranks.lead()) return 0;
  std::cout << log::format(
      "checkpoint: %s (step %lld)\n%s: %.6f bits per byte\n%lld tokens, %lld bytes, %lld "
      "windows of %lld tokens\n",
      loaded.checkpoint_dir.c_str(), (long long)loaded.step, what.c_str(), r.bpb,
      (long long)r.tokens, (long long)r.bytes, (long long)r.windows, (long long)T);
  if (args.has("json")) {
    const nlohmann::json j = {{"checkpoint", loaded.checkpoint_dir},
                              {"step", loaded.step},
                              {"input", what},
                              {"bpb", r.bpb},
                              {"nats", r.nats},
                              {"tokens", r.tokens},
                              {"bytes", r.bytes},
                              {"windows", r.windows}};
    // Generated text may hold invalid UTF-8 (a token cut mid-character): replaced.
    core::write_file_atomic(args.get("json"),
                            j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  }
  return 0;
}

// --tasks: CORE-style tasks of the DCLM bundle format (eval/core_tasks.h).
int eval_tasks(const ParsedArgs& args, train::InferenceModel& loaded, const core::Config& cfg,
               EvalRanks& ranks) {
  auto tasks = eval::read_core_tasks(args.get("tasks"));
  const int64_t max_items = args.get_int("max_per_task", 0);
  for (auto& t : tasks) eval::shuffle_items(t, max_items);
  loaded.model->eval();
  const int64_t max_len = cfg.get_int("model.block_size");
  eval::CoreScore score;
  {
    core::Progress progress("eval: tasks", static_cast<int64_t>(tasks.size()), "tasks");
    for (const auto& t : tasks) {
      score.tasks.push_back(
          eval::score_task(*loaded.model, *loaded.tokenizer, t, max_len, ranks.shard));
      sum_over_ranks(score.tasks.back(), *ranks.group);
      score.core += score.tasks.back().centered;
      progress.set(static_cast<int64_t>(score.tasks.size()));
    }
    score.core /= static_cast<double>(score.tasks.size());
  }
  if (!ranks.lead()) return 0;
  std::cout << log::format("checkpoint: %s (step %lld)\n", loaded.checkpoint_dir.c_str(),
                           (long long)loaded.step);
  std::cout << log::format("%-32s %6s %9s %9s %9s\n", "task", "items", "accuracy", "baseline",
                           "centered");
  nlohmann::json jt = nlohmann::json::array();
  for (const auto& t : score.tasks) {
    std::cout << log::format("%-32s %6lld %9.4f %9.2f %9.4f\n", t.label.c_str(), (long long)t.items,
                             t.accuracy, t.random_baseline, t.centered);
    nlohmann::json items = nlohmann::json::array();
    for (const auto& s : t.scores) {
      items.push_back({{"correct", s.correct}, {"pred", s.pred}, {"mean_losses", s.mean_losses}});
    }
    jt.push_back({{"label", t.label},
                  {"items", t.items},
                  {"accuracy", t.accuracy},
                  {"random_baseline", t.random_baseline},
                  {"centered", t.centered},
                  {"scores", items}});
  }
  std::cout << log::format("CORE: %.4f\n", score.core);
  if (args.has("json")) {
    const nlohmann::json j = {{"checkpoint", loaded.checkpoint_dir},
                              {"step", loaded.step},
                              {"tasks", jt},
                              {"core", score.core}};
    // Generated text may hold invalid UTF-8 (a token cut mid-character): replaced.
    core::write_file_atomic(args.get("json"),
                            j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  }
  return 0;
}

// --chat_tasks: multiple choice by letter and GSM8K on a chat model (eval/chat_tasks.h).
int eval_chat_tasks(const ParsedArgs& args, train::InferenceModel& loaded, EvalRanks& ranks) {
  const auto tasks = eval::read_chat_tasks(args.get("chat_tasks"));
  const auto format = chat_format_of(loaded, args.get("chat_format", "auto"), "--chat_format");
  const data::chat::ChatRenderer renderer(format, *loaded.tokenizer,
                                          loaded.checkpoint_dir + "/tokenizer.json");
  loaded.model->eval();
  std::vector<eval::ChatTaskScore> scores;
  double chatcore = 0;
  {
    core::Progress progress("eval: chat tasks", static_cast<int64_t>(tasks.size()), "tasks");
    for (const auto& t : tasks) {
      scores.push_back(eval::score_chat_task(*loaded.model, renderer, *loaded.tokenizer, t,
                                             args.get_int("max_per_task", 0), ranks.shard));
      sum_over_ranks(scores.back(), *ranks.group);
      chatcore += scores.back().centered;
      progress.set(static_cast<int64_t>(scores.size()));
    }
  }
  chatcore /= static_cast<double>(scores.size());
  if (!ranks.lead()) return 0;
  std::cout << log::format("checkpoint: %s (step %lld), chat format %s\n",
                           loaded.checkpoint_dir.c_str(), (long long)loaded.step,
                           data::chat::describe_chat_format(format).c_str());
  std::cout << log::format("%-32s %6s %9s %9s %9s\n", "task", "items", "accuracy", "chance",
                           "centered");
  nlohmann::json jt = nlohmann::json::array();
  for (const auto& t : scores) {
    std::cout << log::format("%-32s %6zu %9.4f %9.4f %9.4f\n", t.label.c_str(), t.scores.size(),
                             t.accuracy, t.baseline, t.centered);
    nlohmann::json items = nlohmann::json::array();
    for (const auto& s : t.scores) items.push_back({{"correct", s.correct}, {"answer", s.answer}});
    jt.push_back({{"label", t.label},
                  {"accuracy", t.accuracy},
                  {"baseline", t.baseline},
                  {"centered", t.centered},
                  {"scores", items}});
  }
  std::cout << log::format("ChatCORE: %.4f\n", chatcore);
  if (args.has("json")) {
    const nlohmann::json j = {{"checkpoint", loaded.checkpoint_dir},
                              {"step", loaded.step},
                              {"tasks", jt},
                              {"chatcore", chatcore}};
    // Generated text may hold invalid UTF-8 (a token cut mid-character): replaced.
    core::write_file_atomic(args.get("json"),
                            j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  }
  return 0;
}

}  // namespace lmtrain::cli
