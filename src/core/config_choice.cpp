#include "core/config_choice.h"

#include "core/config_schema.h"
#include "core/error.h"

namespace lmtrain::core {
namespace {

const std::vector<std::string>& choices_of(const ChoiceKey& key) {
  const KeySpec* spec = find_key(key.path);
  if (!spec || spec->type != ValueType::kString || spec->choices.size() != key.count) {
    throw Error(std::string("internal: config key '") + key.path +
                "' does not list the choices its enum has (core/config_schema.cpp)");
  }
  return spec->choices;
}

}  // namespace

size_t choice_index(const ChoiceKey& key, const std::string& text, const std::string& origin) {
  const auto& choices = choices_of(key);
  for (size_t i = 0; i < choices.size(); ++i) {
    if (choices[i] == text) return i;
  }
  throw UsageError(origin + " = '" + text + "': expected " + choice_list(key));
}

size_t default_choice_index(const ChoiceKey& key) {
  choices_of(key);  // the schema lists the enum's choices
  return choice_index(key, find_key(key.path)->default_value, "the schema default");
}

const std::string& choice_name(const ChoiceKey& key, size_t index) {
  return choices_of(key).at(index);
}

std::string choice_list(const ChoiceKey& key) {
  const auto& choices = choices_of(key);
  std::string out;
  for (size_t i = 0; i < choices.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
  }
  return out;
}

}  // namespace lmtrain::core
