// What the config mapping's files (hf_config_read.cpp, hf_config_write.cpp, hf_rope.cpp,
// hf_window.cpp) share: typed reads of config.json values with messages that name the key, and
// each family's causal-LM class (config.json's architectures, read and written).
#pragma once
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>

#include "core/error.h"
#include "core/log.h"
#include "model/decoder_options.h"

namespace lmtrain::model::hf {

inline bool has(const nlohmann::json& j, const char* key) {
  return j.contains(key) && !j[key].is_null();
}

template <typename T>
T get_or(const nlohmann::json& j, const char* key, T fallback) {
  if (!has(j, key)) return fallback;
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    // nlohmann turns a float into an integer with a plain cast, undefined for 1e108 (found by
    // fuzz/): only integral values that fit are integers here.
    if (j[key].is_number_float()) {
      const double d = j[key].get<double>();
      if (!(d == std::floor(d) && std::fabs(d) <= 9e18)) {
        throw UsageError("config.json: " + std::string(key) +
                         " is not an integer: " + j[key].dump());
      }
      return static_cast<T>(d);
    }
  }
  // nlohmann converts between numbers and bools loosely; check the JSON type first so that a
  // string or a list gets a message naming the key and what it must be.
  const nlohmann::json& v = j[key];
  const char* expected = std::is_same_v<T, bool>       ? "true or false"
                         : std::is_integral_v<T>       ? "an integer"
                         : std::is_floating_point_v<T> ? "a number"
                                                       : "a string";
  const bool ok = std::is_same_v<T, bool>   ? v.is_boolean()
                  : std::is_arithmetic_v<T> ? v.is_number()
                                            : v.is_string();
  if (!ok) {
    throw UsageError("config.json: " + std::string(key) + " must be " + expected + ", got " +
                     v.dump());
  }
  return v.get<T>();
}

inline std::string num(double v) { return log::format("%.17g", v); }
inline std::string num(int64_t v) { return std::to_string(v); }

// The family's transformers class, as config.json's architectures names it.
inline std::string causal_lm_class(Arch arch) {
  switch (arch) {
    case Arch::kGpt2:
      return "GPT2LMHeadModel";
    case Arch::kLlama:
      return "LlamaForCausalLM";
    case Arch::kQwen2:
      return "Qwen2ForCausalLM";
    case Arch::kQwen3Moe:
      return "Qwen3MoeForCausalLM";
    case Arch::kMixtral:
      return "MixtralForCausalLM";
    case Arch::kMistral:
      return "MistralForCausalLM";
    case Arch::kQwen3:
    case Arch::kNanochat:
      break;
  }
  return "Qwen3ForCausalLM";
}

}  // namespace lmtrain::model::hf
