#include "infer/prompt_file.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "core/error.h"
#include "core/json_strict.h"

namespace lmtrain::infer {
namespace {

PromptLine parse_line(const std::string& text, const std::string& where, int64_t line) {
  const auto j = core::parse_json_strict(text, where);
  if (!j.is_object()) throw Error(where + ": expected a JSON object with a \"prompt\"");
  PromptLine p;
  p.line = line;
  for (const auto& [key, value] : j.items()) {
    if (key == "prompt") {
      if (!value.is_string()) throw Error(where + ": \"prompt\" must be a string");
      p.prompt = value.get<std::string>();
    } else if (key == "id") {
      p.id_json = value.dump();
    } else if (key == "max_new_tokens") {
      if (!value.is_number_integer() || value.get<int64_t>() < 0) {
        throw Error(where + ": \"max_new_tokens\" must be an integer >= 0");
      }
      p.max_new_tokens = value.get<int64_t>();
    } else {
      throw Error(where + ": unknown key \"" + key +
                  "\" (a line holds \"prompt\", and optionally \"id\" and \"max_new_tokens\")");
    }
  }
  if (!j.contains("prompt")) throw Error(where + ": no \"prompt\"");
  if (p.id_json.empty()) p.id_json = std::to_string(line);
  return p;
}

}  // namespace

std::vector<PromptLine> read_prompt_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError("--prompts: cannot read " + path);
  std::vector<PromptLine> out;
  std::string text;
  for (int64_t line = 1; std::getline(in, text); ++line) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    out.push_back(parse_line(text, path + ":" + std::to_string(line), line));
  }
  if (out.empty()) throw Error("--prompts: " + path + " holds no prompts");
  return out;
}

std::vector<std::vector<size_t>> plan_batches(const std::vector<size_t>& lengths,
                                              int64_t batch_size, bool same_length) {
  std::vector<size_t> order(lengths.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return lengths[a] < lengths[b]; });
  std::vector<std::vector<size_t>> batches;
  for (size_t i : order) {
    if (batches.empty() || static_cast<int64_t>(batches.back().size()) >= batch_size ||
        (same_length && lengths[batches.back().front()] != lengths[i])) {
      batches.emplace_back();
    }
    batches.back().push_back(i);
  }
  return batches;
}

}  // namespace lmtrain::infer
