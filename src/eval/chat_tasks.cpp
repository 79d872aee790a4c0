#include "eval/chat_tasks.h"

#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fs.h"
#include "core/json_strict.h"
#include "eval/jsonl_items.h"
#include "infer/generator.h"

namespace lmtrain::eval {
namespace fs = std::filesystem;
namespace {

ChatItem read_chat_item(const nlohmann::json& j, ChatTaskType type, const std::string& where) {
  if (!j.is_object() || !j.contains("question") || !j["question"].is_string()) {
    throw UsageError(where + ": no \"question\" string");
  }
  ChatItem it;
  it.question = j["question"].get<std::string>();
  if (type == ChatTaskType::kGsm8k) {
    if (!j.contains("answer") || !j["answer"].is_string()) {
      throw UsageError(where + ": no \"answer\" string");
    }
    const auto n = gsm8k_number(j["answer"].get<std::string>());
    if (!n) throw UsageError(where + ": the answer has no \"#### NUMBER\" line");
    it.reference = *n;
    return it;
  }
  const auto c = j.find("choices");
  if (c != j.end() && c->is_array()) {
    for (const auto& v : *c) {
      if (!v.is_string()) throw UsageError(where + ": a choice is not a string");
      it.choices.push_back(v.get<std::string>());
    }
  } else if (c != j.end() && c->is_object() && c->contains("text") && (*c)["text"].is_array()) {
    for (const auto& v : (*c)["text"]) {
      if (!v.is_string()) throw UsageError(where + ": a choice is not a string");
      it.choices.push_back(v.get<std::string>());
    }
    if (c->contains("label") && (*c)["label"].is_array()) {
      for (const auto& v : (*c)["label"]) {
        if (!v.is_string()) throw UsageError(where + ": a choice label is not a string");
        it.letters.push_back(v.get<std::string>());
      }
    }
  } else {
    throw UsageError(where + ": no \"choices\" (a list, or {\"text\": [...], \"label\": [...]})");
  }
  if (it.choices.size() < 2 || it.choices.size() > 26) {
    throw UsageError(where + ": " + std::to_string(it.choices.size()) +
                     " choices (2 to 26 are scored by letter)");
  }
  if (it.letters.empty()) {
    for (size_t k = 0; k < it.choices.size(); ++k) it.letters.emplace_back(1, char('A' + k));
  }
  if (it.letters.size() != it.choices.size()) {
    throw UsageError(where + ": as many labels as choices are needed");
  }
  if (j.contains("answer") && j["answer"].is_number_integer()) {
    it.gold = j["answer"].get<int64_t>();
  } else if (j.contains("answerKey") && j["answerKey"].is_string()) {
    const auto key = j["answerKey"].get<std::string>();
    const auto at = std::find(it.letters.begin(), it.letters.end(), key);
    if (at == it.letters.end()) throw UsageError(where + ": answerKey " + key + " is no label");
    it.gold = at - it.letters.begin();
  } else {
    throw UsageError(where + ": no \"answer\" index or \"answerKey\" letter");
  }
  if (it.gold < 0 || it.gold >= static_cast<int64_t>(it.choices.size())) {
    throw UsageError(where + ": answer " + std::to_string(it.gold) + " is not one of the choices");
  }
  return it;
}

data::chat::Conversation user_turn(const std::string& text) {
  data::chat::Conversation c;
  data::chat::Message m;
  m.role = data::chat::Role::kUser;
  m.content = text;
  c.messages.push_back(std::move(m));
  return c;
}

}  // namespace

std::optional<std::string> gsm8k_number(const std::string& text) {
  for (size_t at = text.find("#### "); at != std::string::npos; at = text.find("#### ", at + 1)) {
    size_t i = at + 5;
    std::string n;
    if (i < text.size() && text[i] == '-') n += text[i++];
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) ||
                               text[i] == '.' || text[i] == ',')) {
      if (text[i] != ',') n += text[i];
      ++i;
    }
    if (!n.empty() && n != "-" && i > at + 5 + (text[at + 5] == '-' ? 1 : 0)) return n;
  }
  return std::nullopt;
}

std::string render_multiple_choice(const ChatItem& item) {
  std::string q = "Multiple Choice question: " + item.question + "\n";
  for (size_t k = 0; k < item.choices.size(); ++k) {
    q += "- " + item.choices[k] + "=" + item.letters[k] + "\n";
  }
  return q + "\nRespond only with the letter of the correct answer.";
}

std::vector<ChatTask> read_chat_tasks(const std::string& yaml_path) {
  std::error_code ec;
  if (!fs::is_regular_file(yaml_path, ec)) {
    throw UsageError("--chat_tasks " + yaml_path + " is not a file");
  }
  YAML::Node root;
  try {
    root = YAML::LoadFile(yaml_path);
  } catch (const YAML::Exception& e) {
    throw UsageError(yaml_path + ": not valid YAML (" + std::string(e.what()) + ")");
  }
  if (!root["chat_tasks"] || !root["chat_tasks"].IsSequence() || root["chat_tasks"].size() == 0) {
    throw UsageError(yaml_path + ": no chat_tasks list");
  }
  const std::string base = fs::path(yaml_path).parent_path().string();
  std::vector<ChatTask> tasks;
  for (const auto& t : root["chat_tasks"]) {
    ChatTask task;
    std::string type;
    try {
      task.label = t["label"].as<std::string>();
      type = t["type"].as<std::string>();
      task.path = base + "/" + t["dataset"].as<std::string>();
      if (t["max_new_tokens"]) task.max_new_tokens = t["max_new_tokens"].as<int64_t>();
      if (t["random_baseline"]) task.random_baseline = t["random_baseline"].as<double>();
    } catch (const YAML::Exception& e) {
      throw UsageError(yaml_path +
                       ": a chat task lacks label, type or dataset, or one has the "
                       "wrong type (" +
                       std::string(e.what()) + ")");
    }
    if (type == "multiple_choice") {
      task.type = ChatTaskType::kMultipleChoice;
    } else if (type == "gsm8k") {
      task.type = ChatTaskType::kGsm8k;
    } else {
      throw UsageError(yaml_path + ", task " + task.label + ": type \"" + type +
                       "\" is not multiple_choice or gsm8k");
    }
    if (task.max_new_tokens < 1) {
      throw UsageError(yaml_path + ", task " + task.label + ": max_new_tokens must be >= 1");
    }
    if (!fs::is_regular_file(task.path, ec)) {
      throw UsageError(yaml_path + ", task " + task.label + ": no file " + task.path);
    }
    for_each_jsonl_item(task.path, [&](const nlohmann::json& j, const std::string& where) {
      task.items.push_back(read_chat_item(j, task.type, where));
    });
    if (task.items.empty()) throw UsageError(task.path + ": no items");
    tasks.push_back(std::move(task));
  }
  return tasks;
}

ChatTaskScore score_chat_task(model::GptImpl& model, const data::chat::ChatRenderer& renderer,
                              const data::BpeTokenizer& tok, const ChatTask& task,
                              int64_t max_items, const ItemShard& shard) {
  torch::NoGradGuard no_grad;
  const auto device = model.parameters().front().device();
  ChatTaskScore ts;
  ts.label = task.label;
  auto n = static_cast<int64_t>(task.items.size());
  if (max_items > 0) n = std::min(n, max_items);
  double chance = 0;
  for (int64_t i = 0; i < n; ++i) {
    const ChatItem& item = task.items[static_cast<size_t>(i)];
    const std::string where = task.path + ", item " + std::to_string(i + 1);
    ChatItemScore s;
    if (task.type == ChatTaskType::kMultipleChoice) {
      chance += 1.0 / static_cast<double>(item.choices.size());  // over every item, on every rank
    }
    if (!shard.owns(i)) {
      ts.scores.push_back(std::move(s));
      continue;
    }
    if (task.type == ChatTaskType::kMultipleChoice) {
      const auto prompt = renderer.render_prompt(user_turn(render_multiple_choice(item)), where);
      std::vector<int64_t> letter_ids;
      for (const auto& l : item.letters) {
        const auto ids = tok.encode(l);
        if (ids.size() != 1) {
          throw Error(where + ": the letter \"" + l + "\" is not one token of this tokenizer");
        }
        letter_ids.push_back(ids[0]);
      }
      const auto x = torch::tensor(std::vector<int64_t>(prompt.begin(), prompt.end()), torch::kLong)
                         .unsqueeze(0)
                         .to(device);
      const auto last = model.forward(x)[0][-1].to(torch::kFloat).cpu();  // (V,)
      const auto picked = last.index_select(0, torch::tensor(letter_ids, torch::kLong));
      const int64_t k = picked.argmax().item<int64_t>();
      s.answer = item.letters[static_cast<size_t>(k)];
      s.correct = k == item.gold;
    } else {
      const auto prompt = renderer.render_prompt(user_turn(item.question), where);
      infer::SamplingOptions greedy;
      greedy.temperature = 0;
      auto out = infer::generate(model, prompt, task.max_new_tokens, greedy, 0,
                                 static_cast<int64_t>(renderer.end_token()));
      if (!out.empty() && out.back() == renderer.end_token()) out.pop_back();
      s.answer = tok.decode(out);
      const auto got = gsm8k_number(s.answer);
      s.correct = got && *got == item.reference;
    }
    ts.scores.push_back(std::move(s));
  }
  ts.baseline = task.random_baseline.value_or(
      task.type == ChatTaskType::kMultipleChoice ? chance / static_cast<double>(n) : 0.0);
  finish_chat_task_score(ts);
  return ts;
}

void finish_chat_task_score(ChatTaskScore& ts) {
  int64_t correct = 0;
  for (const auto& s : ts.scores) correct += s.correct;
  ts.accuracy = static_cast<double>(correct) / static_cast<double>(ts.scores.size());
  ts.centered = (ts.accuracy - ts.baseline) / (1.0 - ts.baseline);
}

}  // namespace lmtrain::eval
