// Config written out as text: the resolved config.yaml (to_yaml) and the reference of every key
// (config_reference, for `--help-config` and the README).
#include <yaml-cpp/yaml.h>

#include <sstream>
#include <string>

#include "core/config.h"
#include "core/config_parts.h"

namespace lmtrain::core {

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
    ss << "  " << spec.path << " (" << config_detail::type_name(spec.type) << ", default "
       << (spec.default_value.empty() ? "\"\"" : spec.default_value);
    if (spec.min || spec.max) {
      ss << ", range [" << (spec.min ? config_detail::format_number(*spec.min) : "-inf") << ", "
         << (spec.max ? config_detail::format_number(*spec.max) : "inf") << "]";
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
