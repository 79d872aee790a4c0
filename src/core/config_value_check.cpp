// canonicalize_value: one value's text checked against its schema entry (type, range, choices)
// and turned into the canonical text Config stores; the messages name the key and its origin.
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>

#include "core/config.h"
#include "core/config_parts.h"
#include "core/error.h"

namespace lmtrain::core {
namespace config_detail {

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

// Shortest decimal form that reads back as the same double ("0.1", not "0.10000000000000001").
std::string format_number(double v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, res.ptr);
}

}  // namespace config_detail

namespace {

[[noreturn]] void fail(const KeySpec& spec, const std::string& text, const std::string& origin,
                       const std::string& why) {
  throw UsageError("config key '" + spec.path + "' = '" + text + "' (from " + origin + "): " + why);
}

void check_range(const KeySpec& spec, double v, const std::string& text,
                 const std::string& origin) {
  if (!std::isfinite(v)) fail(spec, text, origin, "must be a finite number");
  if (spec.min && v < *spec.min) {
    fail(spec, text, origin, "out of range, must be >= " + config_detail::format_number(*spec.min));
  }
  if (spec.max && v > *spec.max) {
    fail(spec, text, origin, "out of range, must be <= " + config_detail::format_number(*spec.max));
  }
}

}  // namespace

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
          fail(spec, text, origin, std::string("expected ") + config_detail::type_name(spec.type));
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
        fail(spec, text, origin, std::string("expected ") + config_detail::type_name(spec.type));
      }
      check_range(spec, v, text, origin);
      return config_detail::format_number(v);
    }
    case ValueType::kBool: {
      std::string t = text;
      std::transform(t.begin(), t.end(), t.begin(), ::tolower);
      if (t == "true" || t == "1" || t == "yes" || t == "on") return "true";
      if (t == "false" || t == "0" || t == "no" || t == "off") return "false";
      fail(spec, text, origin, std::string("expected ") + config_detail::type_name(spec.type));
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

}  // namespace lmtrain::core
