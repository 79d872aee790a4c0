// Config's values set and read: the schema defaults, one key set from text (a command-line
// key=value override), the typed getters and one section's values.
#include <map>
#include <string>

#include "core/config.h"
#include "core/config_parts.h"
#include "core/error.h"

namespace lmtrain::core {

Config Config::defaults() {
  Config c;
  for (const auto& spec : config_schema()) {
    c.values_[spec.path] = canonicalize_value(spec, spec.default_value, "schema default");
  }
  return c;
}

void Config::set(const std::string& path, const std::string& text, const std::string& origin) {
  const KeySpec* spec = find_key(path);
  if (!spec)
    throw UsageError("unknown config key '" + path + "' (from " + origin + ")" +
                     config_detail::suggestion(path));
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

}  // namespace lmtrain::core
