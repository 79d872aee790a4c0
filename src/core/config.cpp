#include "core/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "core/error.h"
#include "core/log.h"
#include "core/seed_yaml_keys.h"

namespace lmtrain::core {
namespace {

const char* type_name(ValueType t) {
  switch (t) {
    case ValueType::kInt:
      return "an integer";
    case ValueType::kFloat:
      return "a number";
    case ValueType::kBool:
      return "a boolean (true/false)";
    case ValueType::kString:
      return "a string";
  }
  return "?";
}

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

std::string suggestion(const std::string& path) {
  const KeySpec* best = nullptr;
  size_t best_d = 4;
  for (const auto& spec : config_schema()) {
    size_t d = edit_distance(path, spec.path);
    if (d < best_d) best_d = d, best = &spec;
  }
  return best ? " (did you mean '" + best->path + "'?)" : "";
}

// Shortest decimal form that reads back as the same double ("0.1", not "0.10000000000000001").
std::string format_number(double v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, res.ptr);
}

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

[[noreturn]] void fail(const KeySpec& spec, const std::string& text, const std::string& origin,
                       const std::string& why) {
  throw UsageError("config key '" + spec.path + "' = '" + text + "' (from " + origin + "): " + why);
}

void check_range(const KeySpec& spec, double v, const std::string& text,
                 const std::string& origin) {
  if (!std::isfinite(v)) fail(spec, text, origin, "must be a finite number");
  if (spec.min && v < *spec.min) {
    fail(spec, text, origin, "out of range, must be >= " + format_number(*spec.min));
  }
  if (spec.max && v > *spec.max) {
    fail(spec, text, origin, "out of range, must be <= " + format_number(*spec.max));
  }
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

std::string canonicalize_value(const KeySpec& spec, const std::string& text,
                               const std::string& origin) {
  switch (spec.type) {
    case ValueType::kInt: {
      errno = 0;
      char* end = nullptr;
      long long v = std::strtoll(text.c_str(), &end, 10);
      if (text.empty() || *end != '\0' || errno == ERANGE) {
        // Accept integral floats written like 1e6.
        char* fend = nullptr;
        double d = std::strtod(text.c_str(), &fend);
        if (text.empty() || *fend != '\0' || d != std::floor(d) || std::fabs(d) > 9e18) {
          fail(spec, text, origin, std::string("expected ") + type_name(spec.type));
        }
        v = static_cast<long long>(d);
      }
      check_range(spec, static_cast<double>(v), text, origin);
      return std::to_string(v);
    }
    case ValueType::kFloat: {
      char* end = nullptr;
      double v = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0') {
        fail(spec, text, origin, std::string("expected ") + type_name(spec.type));
      }
      check_range(spec, v, text, origin);
      return format_number(v);
    }
    case ValueType::kBool: {
      std::string t = text;
      std::transform(t.begin(), t.end(), t.begin(), ::tolower);
      if (t == "true" || t == "1" || t == "yes" || t == "on") return "true";
      if (t == "false" || t == "0" || t == "no" || t == "off") return "false";
      fail(spec, text, origin, std::string("expected ") + type_name(spec.type));
    }
    case ValueType::kString: {
      const auto offers = [&](const char* c) {
        return std::find(spec.choices.begin(), spec.choices.end(), c) != spec.choices.end();
      };
      if (offers("true") && offers("false")) {
        // A choice key that offers true and false (train.cuda_graphs: auto, true, false) takes a
        // boolean's spellings for them: configs from when it was a boolean still read.
        std::string t = text;
        std::transform(t.begin(), t.end(), t.begin(), ::tolower);
        if (t == "true" || t == "1" || t == "yes" || t == "on") return "true";
        if (t == "false" || t == "0" || t == "no" || t == "off") return "false";
      }
      if (!spec.choices.empty() &&
          std::find(spec.choices.begin(), spec.choices.end(), text) == spec.choices.end()) {
        std::string allowed;
        for (const auto& c : spec.choices) allowed += (allowed.empty() ? "" : ", ") + c;
        fail(spec, text, origin, "must be one of: " + allowed);
      }
      return text;
    }
  }
  return text;
}

Config Config::defaults() {
  Config c;
  for (const auto& spec : config_schema()) {
    c.values_[spec.path] = canonicalize_value(spec, spec.default_value, "schema default");
  }
  return c;
}

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
                       (is_seed_yaml_section(prefix) ? seed_keys_hint(prefix) : suggestion(path)));
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
                       type_name(spec->type) + ", got a " +
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

void Config::set(const std::string& path, const std::string& text, const std::string& origin) {
  const KeySpec* spec = find_key(path);
  if (!spec)
    throw UsageError("unknown config key '" + path + "' (from " + origin + ")" + suggestion(path));
  values_[path] = canonicalize_value(*spec, text, origin);
}

const std::string& Config::raw(const std::string& path, ValueType expected) const {
  const KeySpec* spec = find_key(path);
  if (!spec) throw Error("internal: unknown config key '" + path + "'");
  if (spec->type != expected) throw Error("internal: config key '" + path + "' read as wrong type");
  auto it = values_.find(path);
  return it != values_.end() ? it->second : spec->default_value;
}

int64_t Config::get_int(const std::string& path) const {
  return std::stoll(raw(path, ValueType::kInt));
}
double Config::get_float(const std::string& path) const {
  return std::stod(raw(path, ValueType::kFloat));
}
bool Config::get_bool(const std::string& path) const {
  return raw(path, ValueType::kBool) == "true";
}
const std::string& Config::get_string(const std::string& path) const {
  return raw(path, ValueType::kString);
}

std::map<std::string, std::string> Config::section(const std::string& name) const {
  std::map<std::string, std::string> out;
  for (const auto& spec : config_schema()) {
    if (spec.path.rfind(name + ".", 0) == 0) {
      auto it = values_.find(spec.path);
      out[spec.path.substr(name.size() + 1)] =
          it != values_.end() ? it->second : spec.default_value;
    }
  }
  return out;
}

std::string Config::to_yaml() const {
  YAML::Emitter out;
  out << YAML::BeginMap;
  std::string current;
  for (const auto& spec : config_schema()) {
    const auto dot = spec.path.find('.');
    const std::string sec = spec.path.substr(0, dot);
    if (sec != current) {
      if (!current.empty()) out << YAML::EndMap;
      out << YAML::Key << sec << YAML::Value << YAML::BeginMap;
      current = sec;
    }
    auto it = values_.find(spec.path);
    const std::string& v = it != values_.end() ? it->second : spec.default_value;
    out << YAML::Key << spec.path.substr(dot + 1) << YAML::Value;
    if (spec.type == ValueType::kString) {
      out << YAML::DoubleQuoted << v;
    } else {
      out << v;
    }
  }
  if (!current.empty()) out << YAML::EndMap;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

std::string config_reference() {
  std::ostringstream ss;
  std::string current;
  for (const auto& spec : config_schema()) {
    const std::string sec = spec.path.substr(0, spec.path.find('.'));
    if (sec != current) {
      ss << "\n[" << sec << "]\n";
      current = sec;
    }
    ss << "  " << spec.path << " (" << type_name(spec.type) << ", default "
       << (spec.default_value.empty() ? "\"\"" : spec.default_value);
    if (spec.min || spec.max) {
      ss << ", range [" << (spec.min ? format_number(*spec.min) : "-inf") << ", "
         << (spec.max ? format_number(*spec.max) : "inf") << "]";
    }
    if (!spec.choices.empty()) {
      ss << ", one of";
      for (const auto& c : spec.choices) ss << " " << c;
    }
    ss << ")\n      " << spec.help << "\n";
  }
  ss << "\nFlat aliases:";
  for (const auto& [alias, target] : config_aliases()) ss << " --" << alias << "=" << target;
  ss << "\n";
  return ss.str();
}

}  // namespace lmtrain::core
