// Whole-string parsing of a non-negative integer (environment variables, launcher flags):
// nullopt for anything else — empty, trailing characters, negative, or above `max`.
#pragma once
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

namespace lmtrain::core {

inline std::optional<int64_t> parse_nonnegative_int(const std::string& text, int64_t max) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used == 0 || used != text.size() || v < 0 || v > max) return std::nullopt;
  return v;
}

}  // namespace lmtrain::core
