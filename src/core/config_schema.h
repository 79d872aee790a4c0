// The schema of the configuration: every key lmtrain knows, with its type, default, range,
// choices and help (the table is config_schema.cpp). It is the one source of truth: validation,
// `--help-config`, the resolved config.yaml, the README's table, the enums' names
// (config_choice.h) and the option structs' defaults all come from it. An option struct starts
// each member at its key's default, read here (no struct writes a default again):
//   int64_t n_layer = core::default_int("model.n_layer");
//   Norm norm = core::default_choice<Norm>();  // config_choice.h
// A member whose key is missing from the schema, or of another type, throws Error when the
// struct is made (tests/options/schema_defaults_test.cpp makes them all).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace lmtrain::core {

enum class ValueType { kInt, kFloat, kBool, kString };

struct KeySpec {
  std::string path;  // "train.max_steps"
  ValueType type;
  std::string default_value;  // canonical text form
  std::optional<double> min;  // inclusive bounds for numbers
  std::optional<double> max;
  std::vector<std::string> choices;  // allowed strings (empty: any)
  std::string help;
};

// All known keys, in display order.
const std::vector<KeySpec>& config_schema();
const KeySpec* find_key(const std::string& path);
// Flat command-line aliases (`--lr` -> "optim.lr"); nullptr if `name` is not one.
const char* alias_target(const std::string& name);
const std::vector<std::pair<std::string, std::string>>& config_aliases();
// The keys model.depth = `depth` > 0 sets (nanochat's depth scaling: one block per unit of
// depth, width 64 * depth, heads of 128), as (path, value) pairs.
std::vector<std::pair<std::string, int64_t>> depth_scaled_keys(int64_t depth);

// The schema default of `path`, typed. Throws Error when the schema has no such key of that type.
int64_t default_int(const char* path);
double default_float(const char* path);
bool default_bool(const char* path);
const std::string& default_string(const char* path);

}  // namespace lmtrain::core
