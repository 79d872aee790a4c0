#include "eval/core_tasks.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fs.h"
#include "core/json_strict.h"
#include "data/chat/chat_render.h"
#include "eval/jsonl_items.h"
#include "eval/python_random.h"

namespace lmtrain::eval {
namespace fs = std::filesystem;
namespace {

// A JSON value as Jinja's {{ }} prints it: strings as they are, numbers as Python's str().
std::string jinja_str(const nlohmann::json& v, const std::string& where) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return v.dump();
  throw UsageError(where + ": a text field holds " + v.dump() + " (a string or integer expected)");
}

std::string text_field(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key)) throw UsageError(where + ": no \"" + std::string(key) + "\"");
  return jinja_str(j.at(key), where);
}

std::vector<std::string> list_field(const nlohmann::json& j, const char* key,
                                    const std::string& where) {
  if (!j.contains(key) || !j.at(key).is_array() || j.at(key).empty()) {
    throw UsageError(where + ": \"" + std::string(key) + "\" is not a non-empty list");
  }
  std::vector<std::string> out;
  for (const auto& v : j.at(key)) out.push_back(jinja_str(v, where));
  return out;
}

TaskItem read_item(const nlohmann::json& j, TaskType type, const std::string& where) {
  if (!j.is_object()) throw UsageError(where + ": not a JSON object");
  TaskItem it;
  if (type == TaskType::kLanguageModeling) {
    it.context = text_field(j, "context", where);
    it.continuation = text_field(j, "continuation", where);
    return it;
  }
  if (type == TaskType::kMultipleChoice) {
    it.query = text_field(j, "query", where);
    it.choices = list_field(j, "choices", where);
  } else {
    it.choices = list_field(j, "context_options", where);
    it.continuation = text_field(j, "continuation", where);
  }
  if (!j.contains("gold") || !j.at("gold").is_number_integer()) {
    throw UsageError(where + ": no integer \"gold\"");
  }
  it.gold = j.at("gold").get<int64_t>();
  if (it.gold < 0 || it.gold >= static_cast<int64_t>(it.choices.size())) {
    throw UsageError(where + ": gold " + std::to_string(it.gold) + " is not one of the " +
                     std::to_string(it.choices.size()) + " options");
  }
  return it;
}

// "Eval Task" -> "Random baseline" of eval_meta_data.csv (fields may be double-quoted).
std::map<std::string, double> read_baselines(const std::string& path) {
  std::map<std::string, double> out;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return out;
  const std::string text = core::read_file(path);
  std::vector<std::vector<std::string>> rows(1, std::vector<std::string>(1));
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        rows.back().back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        rows.back().back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      rows.back().emplace_back();
    } else if (c == '\n') {
      rows.emplace_back(1);
    } else if (c != '\r') {
      rows.back().back() += c;
    }
  }
  const auto& header = rows.front();
  size_t task_col = header.size(), base_col = header.size();
  for (size_t c = 0; c < header.size(); ++c) {
    if (header[c] == "Eval Task") task_col = c;
    if (header[c] == "Random baseline") base_col = c;
  }
  if (task_col == header.size() || base_col == header.size()) {
    throw UsageError(path + ": no \"Eval Task\" and \"Random baseline\" columns");
  }
  for (size_t r = 1; r < rows.size(); ++r) {
    if (rows[r].size() <= std::max(task_col, base_col)) continue;
    try {
      out[rows[r][task_col]] = std::stod(rows[r][base_col]);
    } catch (const std::exception&) {
      throw UsageError(path + ": row " + std::to_string(r + 1) + "'s random baseline \"" +
                       rows[r][base_col] + "\" is not a number");
    }
  }
  return out;
}

TaskType task_type_from(const std::string& s, const std::string& where) {
  if (s == "multiple_choice") return TaskType::kMultipleChoice;
  if (s == "schema") return TaskType::kSchema;
  if (s == "language_modeling") return TaskType::kLanguageModeling;
  throw UsageError(where + ": icl_task_type \"" + s +
                   "\" is not multiple_choice, schema or language_modeling");
}

// The length of the common prefix (left) or suffix (right) of all sequences.
int64_t common_length(const std::vector<std::vector<int64_t>>& seqs, bool left) {
  size_t min_len = seqs[0].size();
  for (const auto& s : seqs) min_len = std::min(min_len, s.size());
  for (size_t i = 0; i < min_len; ++i) {
    const int64_t t = left ? seqs[0][i] : seqs[0][seqs[0].size() - 1 - i];
    for (const auto& s : seqs) {
      if ((left ? s[i] : s[s.size() - 1 - i]) != t) return static_cast<int64_t>(i);
    }
  }
  return static_cast<int64_t>(min_len);
}

}  // namespace

const char* task_type_name(TaskType t) {
  switch (t) {
    case TaskType::kMultipleChoice:
      return "multiple_choice";
    case TaskType::kSchema:
      return "schema";
    case TaskType::kLanguageModeling:
      return "language_modeling";
  }
  return "multiple_choice";
}

std::vector<CoreTask> read_core_tasks(const std::string& dir_or_file) {
  std::error_code ec;
  const bool is_dir = fs::is_directory(dir_or_file, ec);
  const std::string yaml_path = is_dir ? dir_or_file + "/core.yaml" : dir_or_file;
  if (!fs::is_regular_file(yaml_path, ec)) {
    throw UsageError("--tasks " + dir_or_file + ": " +
                     (is_dir ? "no core.yaml in it" : std::string("not a file or directory")));
  }
  const std::string base = fs::path(yaml_path).parent_path().string();
  const auto baselines = read_baselines(base + "/eval_meta_data.csv");
  YAML::Node root;
  try {
    root = YAML::LoadFile(yaml_path);
  } catch (const YAML::Exception& e) {
    throw UsageError(yaml_path + ": not valid YAML (" + std::string(e.what()) + ")");
  }
  if (!root["icl_tasks"] || !root["icl_tasks"].IsSequence()) {
    throw UsageError(yaml_path + ": no icl_tasks list");
  }
  std::vector<CoreTask> tasks;
  for (const auto& t : root["icl_tasks"]) {
    CoreTask task;
    try {
      task.label = t["label"].as<std::string>();
      const std::string where = yaml_path + ", task " + task.label;
      task.type = task_type_from(t["icl_task_type"].as<std::string>(), where);
      const auto shots = t["num_fewshot"];
      task.num_fewshot = shots.IsSequence() ? shots[0].as<int64_t>() : shots.as<int64_t>();
      if (t["continuation_delimiter"])
        task.delimiter = t["continuation_delimiter"].as<std::string>();
      if (t["random_baseline"]) {
        task.random_baseline = t["random_baseline"].as<double>();
      } else if (baselines.count(task.label)) {
        task.random_baseline = baselines.at(task.label);
      } else {
        throw UsageError(where +
                         ": no random baseline (eval_meta_data.csv beside it, or the "
                         "task's random_baseline): the centered accuracy needs one");
      }
      task.path = base + "/eval_data/" + t["dataset_uri"].as<std::string>();
    } catch (const YAML::Exception& e) {
      throw UsageError(yaml_path +
                       ": a task lacks label, icl_task_type, num_fewshot or "
                       "dataset_uri, or one has the wrong type (" +
                       std::string(e.what()) + ")");
    }
    if (!fs::is_regular_file(task.path, ec)) {
      throw UsageError(yaml_path + ", task " + task.label + ": no file " + task.path);
    }
    for_each_jsonl_item(task.path, [&](const nlohmann::json& j, const std::string& where) {
      task.items.push_back(read_item(j, task.type, where));
    });
    if (static_cast<int64_t>(task.items.size()) <= task.num_fewshot) {
      throw UsageError(task.path + ": " + std::to_string(task.items.size()) +
                       " items, too few for " + std::to_string(task.num_fewshot) +
                       " few-shot examples each");
    }
    tasks.push_back(std::move(task));
  }
  if (tasks.empty()) throw UsageError(yaml_path + ": icl_tasks is empty");
  return tasks;
}

std::vector<std::string> render_prompts(const CoreTask& task, int64_t index) {
  const auto n = static_cast<int64_t>(task.items.size());
  std::vector<const TaskItem*> shots;
  if (task.num_fewshot > 0) {
    PythonRandom rng(static_cast<uint64_t>(1234 + index));
    std::vector<int64_t> others;
    for (int64_t i = 0; i < n; ++i) {
      if (i != index) others.push_back(i);
    }
    for (int64_t i : rng.sample(others, task.num_fewshot))
      shots.push_back(&task.items[static_cast<size_t>(i)]);
  }
  const TaskItem& item = task.items[static_cast<size_t>(index)];
  const std::string& d = task.delimiter;
  std::string prefix;
  std::vector<std::string> prompts;
  switch (task.type) {
    case TaskType::kMultipleChoice:
      for (const auto* s : shots)
        prefix += s->query + d + s->choices[static_cast<size_t>(s->gold)] + "\n\n";
      for (const auto& c : item.choices) prompts.push_back(prefix + item.query + d + c);
      break;
    case TaskType::kSchema:
      for (const auto* s : shots) {
        prefix += s->choices[static_cast<size_t>(s->gold)] + d + s->continuation + "\n\n";
      }
      for (const auto& c : item.choices) prompts.push_back(prefix + c + d + item.continuation);
      break;
    case TaskType::kLanguageModeling:
      for (const auto* s : shots) {
        prefix += data::chat::python_strip(s->context) + d + s->continuation + "\n\n";
      }
      prefix += data::chat::python_strip(item.context) + d;
      prompts.push_back(data::chat::python_strip(prefix));
      prompts.push_back(prefix + item.continuation);
      break;
  }
  return prompts;
}

ScoringRows scoring_rows(const CoreTask& task, int64_t index, const data::BpeTokenizer& tok,
                         int64_t bos, int64_t max_len) {
  ScoringRows r;
  for (const auto& p : render_prompts(task, index)) {
    std::vector<int64_t> ids{bos};
    for (uint32_t id : tok.encode(p)) ids.push_back(id);
    r.tokens.push_back(std::move(ids));
  }
  switch (task.type) {
    case TaskType::kMultipleChoice: {
      const int64_t start = common_length(r.tokens, true);
      for (const auto& t : r.tokens) {
        r.start.push_back(start);
        r.end.push_back(static_cast<int64_t>(t.size()));
      }
      break;
    }
    case TaskType::kSchema: {
      const int64_t suffix = common_length(r.tokens, false);
      for (const auto& t : r.tokens) {
        r.end.push_back(static_cast<int64_t>(t.size()));
        r.start.push_back(static_cast<int64_t>(t.size()) - suffix);
      }
      break;
    }
    case TaskType::kLanguageModeling: {
      const auto& without = r.tokens[0];
      const auto& with = r.tokens[1];
      if (without.size() >= with.size() ||
          !std::equal(without.begin(), without.end(), with.begin())) {
        throw Error(task.path + ", item " + std::to_string(index) +
                    ": the context's tokens are not a prefix of context + continuation's");
      }
      r.start = {static_cast<int64_t>(without.size())};
      r.end = {static_cast<int64_t>(with.size())};
      r.tokens = {with};
      break;
    }
  }
  // Too long for the model: keep the last max_len tokens and move the spans with them.
  for (size_t i = 0; i < r.tokens.size(); ++i) {
    const auto len = static_cast<int64_t>(r.tokens[i].size());
    if (len <= max_len) continue;
    const int64_t crop = len - max_len;
    r.tokens[i].erase(r.tokens[i].begin(), r.tokens[i].begin() + crop);
    r.start[i] = std::max<int64_t>(1, r.start[i] - crop);
    r.end[i] -= crop;
  }
  return r;
}

void shuffle_items(CoreTask& task, int64_t max_items) {
  const auto order = PythonRandom(1337).shuffle_order(static_cast<int64_t>(task.items.size()));
  std::vector<TaskItem> items;
  for (int64_t i : order) {
    if (max_items > 0 && static_cast<int64_t>(items.size()) == max_items) break;
    items.push_back(std::move(task.items[static_cast<size_t>(i)]));
  }
  task.items = std::move(items);
  if (static_cast<int64_t>(task.items.size()) <= task.num_fewshot) {
    throw UsageError("task " + task.label + ": " + std::to_string(task.items.size()) +
                     " items, too few for " + std::to_string(task.num_fewshot) +
                     " few-shot examples each (raise --max_per_task)");
  }
}

int64_t bos_token(const data::BpeTokenizer& tok) {
  for (const char* name : {"<|bos|>", "<|begin_of_text|>"}) {
    if (const auto id = tok.special_id(name)) return *id;
  }
  return tok.eot_id();
}

}  // namespace lmtrain::eval
