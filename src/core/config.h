// The resolved configuration of a run: a flat map "section.key" -> value, checked against the
// schema in config_schema.cpp (type, range, allowed values). Built in layers:
//   schema defaults  <  YAML file  <  --section.key=value overrides (and flat aliases).
// Every error names the full key path and where the bad value came from, and is a UsageError
// (exit code 2).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/config_choice.h"
#include "core/config_schema.h"

namespace YAML {
class Node;
}

namespace lmtrain::core {

struct SeedYamlKey;

class Config {
 public:
  // Every key at its schema default.
  static Config defaults();

  // Merge a YAML file / node. Unknown keys, non-scalar values where scalars belong, and bad
  // values are errors naming the key path and `origin`.
  void merge_yaml_file(const std::string& path);
  void merge_yaml(const YAML::Node& root, const std::string& origin);
  // Merge a YAML document held in a string (e.g. the config stored in a checkpoint).
  void merge_yaml_text(const std::string& text, const std::string& origin);

  // Set one key from text (as typed on the command line). Validates type and range.
  void set(const std::string& path, const std::string& text, const std::string& origin);

  int64_t get_int(const std::string& path) const;
  double get_float(const std::string& path) const;
  bool get_bool(const std::string& path) const;
  const std::string& get_string(const std::string& path) const;

  // Nested YAML with sections in schema order (subsection keys as "moe.top_k").
  std::string to_yaml() const;
  // Values of one section ("model") as key -> canonical text, for comparisons.
  std::map<std::string, std::string> section(const std::string& name) const;

 private:
  // The keys of one (sub)section mapping, `prefix` being its path ("model", "model.moe").
  void merge_keys(const YAML::Node& map, const std::string& prefix, const std::string& origin);
  // A key of the temporal-encoder pretrainer's YAML (core/seed_yaml_keys.h): sets its target, or
  // logs why it has no effect.
  void merge_seed_key(const SeedYamlKey& seed, const std::string& text, const std::string& origin);
  const std::string& raw(const std::string& path, ValueType expected) const;
  std::map<std::string, std::string> values_;  // path -> canonical text
};

// Checks `text` against `spec` and returns the canonical form; throws UsageError naming
// spec.path and origin.
std::string canonicalize_value(const KeySpec& spec, const std::string& text,
                               const std::string& origin);

// Human-readable reference of every key (for `--help-config` and the README).
std::string config_reference();

// The value of E's key (core/config_choice.h) in `cfg` (already one of the choices: Config
// validates on set).
template <class E, class = ChoiceEnum<E>>
E get_choice(const Config& cfg) {
  const ChoiceKey key = choice_key(E{});
  return parse_choice<E>(cfg.get_string(key.path), std::string("config key '") + key.path + "'");
}

}  // namespace lmtrain::core
