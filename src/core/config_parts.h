// The parts of Config (config.h), each in a file of its own:
//   config_keys.cpp         the schema's keys found by path or flat alias; "did you mean" hints
//   config_value_check.cpp  canonicalize_value: a value's text checked against its KeySpec
//   config_yaml.cpp         YAML files, texts and nodes merged in (seed sections included)
//   config_access.cpp       defaults, set (one key=value override), the typed getters, section
//   config_render.cpp       to_yaml and config_reference (`--help-config`)
// Internal to core/: the helpers more than one of those files uses are declared here, not in
// config.h, so that config.h keeps to Config's API; the namespace keeps their short names off
// core's own.
#pragma once
#include <string>

#include "core/config_schema.h"

namespace lmtrain::core::config_detail {

// "an integer", "a number", ... for error messages and the reference (config_value_check.cpp).
const char* type_name(ValueType t);

// Shortest decimal form that reads back as the same double ("0.1", not "0.10000000000000001")
// (config_value_check.cpp).
std::string format_number(double v);

// " (did you mean 'optim.lr'?)" for an unknown key path near a schema key, else ""
// (config_keys.cpp).
std::string suggestion(const std::string& path);

}  // namespace lmtrain::core::config_detail
