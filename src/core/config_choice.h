// Typed string options. A string key whose schema entry lists its allowed values (its choices,
// config_schema.cpp) is read once into an enum whose enumerators stand in the same order as that
// list, so the schema stays the one place that spells the names: validation, --help-config, the
// README table, and these enums' parsing and names all come from it. Code past the reading
// compares enums, never the text.
//
// The folder that owns an option declares its enum and, beside it, the key it reads:
//   enum class Norm { kLayerNorm, kRmsNorm };  // in the order of model.norm's choices
//   constexpr core::ChoiceKey choice_key(Norm) { return {"model.norm", 2}; }
// then a reader (cli/, options/) reads it with core::get_choice<Norm>(cfg) (core/config.h) and
// everyone names it with core::to_string(norm). Declaring the enum needs no Config.
// `count` is the number of enumerators: an enum and a schema list that drifted apart throw on
// the first read (and tests/core/config_choice_test.cpp reads them all).
#pragma once
#include <cstddef>
#include <string>
#include <type_traits>

namespace lmtrain::core {

struct ChoiceKey {
  const char* path;  // "model.norm"
  size_t count;      // enumerators of the enum that reads it
};

// Index of `text` among the choices of `key.path`. Throws UsageError "<origin> = 'text': expected
// a, b or c" when it is none of them (origin: the key or a flag); Error when the schema does not
// list exactly key.count choices for key.path.
size_t choice_index(const ChoiceKey& key, const std::string& text, const std::string& origin);
// The schema's name of choice `index` of `key.path`.
const std::string& choice_name(const ChoiceKey& key, size_t index);
// "a, b or c": the choices of `key.path`, for messages.
std::string choice_list(const ChoiceKey& key);

// Enums that have a choice_key() (found by argument-dependent lookup in the enum's namespace).
template <class E>
using ChoiceEnum = std::enable_if_t<std::is_enum_v<E>, decltype(choice_key(E{}))>;

// `text` (from `origin`, e.g. a flag "--device") as an E.
template <class E, class = ChoiceEnum<E>>
E parse_choice(const std::string& text, const std::string& origin) {
  return static_cast<E>(choice_index(choice_key(E{}), text, origin));
}

// The schema default of `key` (its index among the choices).
size_t default_choice_index(const ChoiceKey& key);

// E's key's schema default: what an option struct's enum member starts as
// (core/config_schema.h).
template <class E, class = ChoiceEnum<E>>
E default_choice() {
  return static_cast<E>(default_choice_index(choice_key(E{})));
}

// The option's name as the config spells it ("rmsnorm"), for logs, describe() and messages.
template <class E, class = ChoiceEnum<E>>
const std::string& to_string(E value) {
  return choice_name(choice_key(value), static_cast<size_t>(value));
}

}  // namespace lmtrain::core
