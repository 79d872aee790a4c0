// The schema's keys looked up by name: by full path (find_key), by flat command-line alias
// (alias_target), and the nearest key to a misspelt one (suggestion, for "did you mean").
#include <algorithm>
#include <string>
#include <vector>

#include "core/config_parts.h"
#include "core/config_schema.h"

namespace lmtrain::core {
namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

namespace config_detail {

std::string suggestion(const std::string& path) {
  const KeySpec* best = nullptr;
  size_t best_d = 4;
  for (const auto& spec : config_schema()) {
    size_t d = edit_distance(path, spec.path);
    if (d < best_d) best_d = d, best = &spec;
  }
  return best ? " (did you mean '" + best->path + "'?)" : "";
}

}  // namespace config_detail

const KeySpec* find_key(const std::string& path) {
  for (const auto& spec : config_schema()) {
    if (spec.path == path) return &spec;
  }
  return nullptr;
}

const char* alias_target(const std::string& name) {
  for (const auto& [alias, target] : config_aliases()) {
    if (alias == name) return target.c_str();
  }
  return nullptr;
}

}  // namespace lmtrain::core
