// Config's YAML input: a file, a text or a parsed node merged into the values, section by
// section, with the temporal-encoder pretrainer's sections mapped onto our keys
// (core/seed_yaml_keys.h); unknown or duplicated keys and misplaced values are UsageErrors.
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <map>
#include <string>

#include "core/config.h"
#include "core/config_parts.h"
#include "core/error.h"
#include "core/log.h"
#include "core/seed_yaml_keys.h"

namespace lmtrain::core {
namespace {

// " (that section takes: num_epochs -> train.epochs, ...)" for an unknown key of a seed section.
std::string seed_keys_hint(const std::string& section) {
  std::string list;
  for (const auto& k : seed_yaml_keys()) {
    if (k.path.rfind(section + ".", 0) != 0) continue;
    list += (list.empty() ? "" : ", ") + k.path.substr(section.size() + 1) + " -> " +
            (k.target.empty() ? "(no effect)" : k.target);
  }
  return " (the " + section + ": section of the temporal-encoder pretrainer's YAML takes " + list +
         "; our own keys go in the sections of `lmtrain train --help-config`)";
}

bool is_known_section(const std::string& name) {
  for (const auto& spec : config_schema()) {
    if (spec.path.rfind(name + ".", 0) == 0) return true;
  }
  return false;
}

// yaml-cpp keeps every pair of a mapping, so a key written twice would silently take its last
// value: an error naming the key and both lines instead.
void check_unique_keys(const YAML::Node& map, const std::string& prefix,
                       const std::string& origin) {
  std::map<std::string, int> first_line;
  for (const auto& kv : map) {
    const int line = kv.first.Mark().line + 1;
    if (!kv.first.IsScalar()) {
      // A "? [a, b]" or "{a: 1}: x" key: yaml-cpp's as<std::string>() would throw its own
      // "bad conversion" (found by fuzz/).
      throw UsageError(origin + ", line " + std::to_string(line) +
                       ": a key must be a plain name, not a " +
                       (kv.first.IsMap()        ? "mapping"
                        : kv.first.IsSequence() ? "list"
                                                : "null"));
    }
    const std::string key = kv.first.Scalar();
    const auto [it, inserted] = first_line.emplace(key, line);
    if (!inserted) {
      throw UsageError("duplicate config key '" + prefix + key + "' in " + origin + " (lines " +
                       std::to_string(it->second) + " and " + std::to_string(line) +
                       "): keep one of them");
    }
  }
}

}  // namespace

void Config::merge_yaml_file(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) {
    throw UsageError("config file '" + path + "' does not exist or is not a file");
  }
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    throw UsageError("config file '" + path + "' is not valid YAML: " + e.what());
  }
  merge_yaml(root, path);
}

void Config::merge_yaml_text(const std::string& text, const std::string& origin) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw UsageError(origin + " is not valid YAML: " + e.what());
  }
  merge_yaml(root, origin);
}

void Config::merge_yaml(const YAML::Node& root, const std::string& origin) {
  if (root.IsNull()) return;  // an empty file changes nothing
  if (!root.IsMap()) throw UsageError(origin + ": the top level must be a mapping of sections");
  check_unique_keys(root, "", origin);
  for (const auto& section : root) {
    const std::string name = section.first.as<std::string>();
    if (!is_known_section(name) && !is_seed_yaml_section(name)) {
      throw UsageError("unknown config section '" + name + "' in " + origin);
    }
    if (!section.second.IsMap()) {
      if (section.second.IsNull()) continue;  // "train:" with nothing under it
      throw UsageError("config section '" + name + "' in " + origin + " must be a mapping of keys");
    }
    merge_keys(section.second, name, origin);
  }
}

void Config::merge_keys(const YAML::Node& map, const std::string& prefix,
                        const std::string& origin) {
  check_unique_keys(map, prefix + ".", origin);
  for (const auto& kv : map) {
    const std::string path = prefix + "." + kv.first.as<std::string>();
    const KeySpec* spec = find_key(path);
    if (!spec && kv.second.IsMap() && is_known_section(path)) {
      merge_keys(kv.second, path, origin);  // a subsection, e.g. model: moe: num_experts: 8
      continue;
    }
    const SeedYamlKey* seed = spec ? nullptr : find_seed_yaml_key(path);
    if (seed && kv.second.IsScalar()) {
      merge_seed_key(*seed, kv.second.Scalar(), origin);
      continue;
    }
    if (!spec && !seed) {
      throw UsageError("unknown config key '" + path + "' in " + origin +
                       (is_seed_yaml_section(prefix) ? seed_keys_hint(prefix)
                                                     : config_detail::suggestion(path)));
    }
    if (spec && spec->type == ValueType::kString && spec->choices.empty() &&
        kv.second.IsSequence()) {
      // A list for a free-form string key (e.g. lora.targets: [q, v]): its items, comma-joined.
      std::string joined;
      for (const auto& item : kv.second) {
        if (!item.IsScalar()) {
          throw UsageError("config key '" + path + "' in " + origin +
                           " expects a list of plain values");
        }
        joined += (joined.empty() ? "" : ",") + item.Scalar();
      }
      values_[path] = canonicalize_value(*spec, joined, origin);
      continue;
    }
    if (!kv.second.IsScalar()) {
      if (!spec) throw UsageError("config key '" + path + "' in " + origin + " expects a value");
      throw UsageError("config key '" + path + "' in " + origin + " expects " +
                       config_detail::type_name(spec->type) + ", got a " +
                       (kv.second.IsMap()        ? "mapping"
                        : kv.second.IsSequence() ? "list"
                                                 : "null"));
    }
    values_[path] = canonicalize_value(*spec, kv.second.Scalar(), origin);
  }
}

void Config::merge_seed_key(const SeedYamlKey& seed, const std::string& text,
                            const std::string& origin) {
  if (seed.target.empty()) {
    log::info(seed.path + " = " + text + " (" + origin + ") has no effect: " + seed.why);
    return;
  }
  const std::string where = origin + ", " + seed.path + " as " + seed.target;
  values_[seed.target] =
      canonicalize_value(*find_key(seed.target), seed_yaml_value(seed, text, where), where);
}

}  // namespace lmtrain::core
