#include "data/text_normalizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/onig_pattern.h"

namespace lmtrain::data {

struct TextNormalizer::Step {
  virtual ~Step() = default;
  // `text` is valid UTF-8 (apply() hands over only valid runs).
  virtual std::string run(const std::string& text) const = 0;
};

namespace {

using nlohmann::json;

// utf8proc_map with `options` (NFC = STABLE | COMPOSE, ...).
class UnicodeMapStep : public TextNormalizer::Step {
 public:
  explicit UnicodeMapStep(int options) : options_(options) {}
  std::string run(const std::string& text) const override {
    utf8proc_uint8_t* out = nullptr;
    const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                static_cast<utf8proc_ssize_t>(text.size()), &out,
                                static_cast<utf8proc_option_t>(options_));
    if (n < 0) throw Error(std::string("text normalizer: ") + utf8proc_errmsg(n));
    std::string result(reinterpret_cast<char*>(out), static_cast<size_t>(n));
    std::free(out);
    return result;
  }

 private:
  int options_;
};

// Calls fn(code point) for every code point of valid UTF-8 `text` and appends what it returns
// (or nothing for a negative value).
template <typename F>
std::string map_code_points(const std::string& text, F fn) {
  std::string out;
  out.reserve(text.size());
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  utf8proc_ssize_t left = static_cast<utf8proc_ssize_t>(text.size());
  while (left > 0) {
    utf8proc_int32_t cp = 0;
    const auto n = utf8proc_iterate(p, left, &cp);
    if (n <= 0) break;  // cannot happen on valid UTF-8
    const utf8proc_int32_t mapped = fn(cp);
    if (mapped >= 0) {
      utf8proc_uint8_t buf[4];
      const auto m = utf8proc_encode_char(mapped, buf);
      out.append(reinterpret_cast<char*>(buf), static_cast<size_t>(m));
    }
    p += n;
    left -= n;
  }
  return out;
}

class LowercaseStep : public TextNormalizer::Step {
 public:
  std::string run(const std::string& text) const override {
    return map_code_points(text, [](utf8proc_int32_t c) { return utf8proc_tolower(c); });
  }
};

// tokenizers' StripAccents: removes combining marks (categories Mn, Mc and Me, as Rust's
// is_combining_mark: Devanagari's vowel signs go too) from the text as it is (it is meant to
// follow NFD).
class StripAccentsStep : public TextNormalizer::Step {
 public:
  std::string run(const std::string& text) const override {
    return map_code_points(text, [](utf8proc_int32_t c) {
      const auto cat = utf8proc_category(c);
      const bool mark =
          cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_MC || cat == UTF8PROC_CATEGORY_ME;
      return mark ? -1 : c;
    });
  }
};

// tokenizers' Strip: Unicode whitespace (char::is_whitespace) off the left and/or right end.
class StripStep : public TextNormalizer::Step {
 public:
  StripStep(bool left, bool right) : left_(left), right_(right) {}
  std::string run(const std::string& text) const override {
    std::vector<std::pair<size_t, bool>> cps;  // (byte offset, is whitespace)
    const auto* base = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
    size_t off = 0;
    while (off < text.size()) {
      utf8proc_int32_t cp = 0;
      const auto n =
          utf8proc_iterate(base + off, static_cast<utf8proc_ssize_t>(text.size() - off), &cp);
      if (n <= 0) break;
      cps.emplace_back(off, is_space(cp));
      off += static_cast<size_t>(n);
    }
    size_t b = 0, e = cps.size();
    if (left_) {
      while (b < e && cps[b].second) ++b;
    }
    if (right_) {
      while (e > b && cps[e - 1].second) --e;
    }
    const size_t from = b < cps.size() ? cps[b].first : text.size();
    const size_t to = e < cps.size() ? cps[e].first : text.size();
    return text.substr(from, to - from);
  }

 private:
  // Rust's char::is_whitespace: the White_Space property.
  static bool is_space(utf8proc_int32_t c) {
    if ((c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680) {
      return true;
    }
    if ((c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
        c == 0x3000) {
      return true;
    }
    return false;
  }
  bool left_, right_;
};

class PrependStep : public TextNormalizer::Step {
 public:
  explicit PrependStep(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string run(const std::string& text) const override {
    return text.empty() ? text : prefix_ + text;  // tokenizers prepends to non-empty text only
  }

 private:
  std::string prefix_;
};

class ReplaceStringStep : public TextNormalizer::Step {
 public:
  ReplaceStringStep(std::string pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  std::string run(const std::string& text) const override {
    if (pattern_.empty()) return text;
    std::string out;
    size_t pos = 0;
    for (size_t hit; (hit = text.find(pattern_, pos)) != std::string::npos;) {
      out.append(text, pos, hit - pos).append(content_);
      pos = hit + pattern_.size();
    }
    return out.append(text, pos, std::string::npos);
  }

 private:
  std::string pattern_, content_;
};

class ReplaceRegexStep : public TextNormalizer::Step {
 public:
  ReplaceRegexStep(const std::string& pattern, std::string content, const std::string& source)
      : content_(std::move(content)) {
    int code = 0;
    PCRE2_SIZE offset = 0;
    // \w and \s as Oniguruma (Hugging Face `tokenizers`) defines them (data/onig_pattern.h).
    const std::string pcre2_pattern = pcre2_pattern_for_onig(pattern);
    re_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pcre2_pattern.data()), pcre2_pattern.size(),
                        PCRE2_UTF | PCRE2_UCP, &code, &offset, nullptr);
    if (!re_) {
      PCRE2_UCHAR buf[256];
      pcre2_get_error_message(code, buf, sizeof(buf));
      throw Error("tokenizer file " + source + ": normalizer Replace regex '" + pattern +
                  "' does not compile: " + reinterpret_cast<char*>(buf));
    }
  }
  ~ReplaceRegexStep() override { pcre2_code_free(re_); }
  std::string run(const std::string& text) const override {
    std::string out(text.size() * 2 + 64, '\0');
    for (int attempt = 0; attempt < 2; ++attempt) {
      PCRE2_SIZE n = out.size();
      const int rc = pcre2_substitute(
          re_, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0,
          PCRE2_SUBSTITUTE_GLOBAL | PCRE2_SUBSTITUTE_LITERAL | PCRE2_SUBSTITUTE_OVERFLOW_LENGTH,
          nullptr, nullptr, reinterpret_cast<PCRE2_SPTR>(content_.data()), content_.size(),
          reinterpret_cast<PCRE2_UCHAR*>(out.data()), &n);
      if (rc >= 0) {
        out.resize(n);
        return out;
      }
      if (rc != PCRE2_ERROR_NOMEMORY) throw Error("text normalizer: Replace regex failed");
      out.resize(n);  // the length it needs
    }
    throw Error("text normalizer: Replace regex output did not fit");
  }

 private:
  pcre2_code* re_ = nullptr;
  std::string content_;
};

void parse_step(const json& j, const std::string& source,
                std::vector<std::unique_ptr<TextNormalizer::Step>>* steps) {
  auto bad = [&](const std::string& why) {
    return Error("tokenizer file " + source + ": normalizer " + why +
                 " (lmtrain applies NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents, "
                 "Replace, Prepend and Sequence)");
  };
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    throw bad("entry without a \"type\": " + j.dump());
  }
  const std::string type = j["type"].get<std::string>();
  auto text_field = [&](const char* key) {
    if (!j.contains(key) || !j[key].is_string()) {
      throw bad(type + " needs a string \"" + std::string(key) + "\"");
    }
    return j[key].get<std::string>();
  };
  if (type == "NFC") {
    steps->push_back(std::make_unique<UnicodeMapStep>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  } else if (type == "NFD") {
    steps->push_back(std::make_unique<UnicodeMapStep>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE));
  } else if (type == "NFKC") {
    steps->push_back(
        std::make_unique<UnicodeMapStep>(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT));
  } else if (type == "NFKD") {
    steps->push_back(
        std::make_unique<UnicodeMapStep>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT));
  } else if (type == "Lowercase") {
    steps->push_back(std::make_unique<LowercaseStep>());
  } else if (type == "StripAccents") {
    steps->push_back(std::make_unique<StripAccentsStep>());
  } else if (type == "Strip") {
    steps->push_back(
        std::make_unique<StripStep>(j.value("strip_left", true), j.value("strip_right", true)));
  } else if (type == "Prepend") {
    steps->push_back(std::make_unique<PrependStep>(text_field("prepend")));
  } else if (type == "Replace") {
    const std::string content = text_field("content");
    const json& p = j.value("pattern", json());
    if (p.is_object() && p.contains("String") && p["String"].is_string()) {
      steps->push_back(
          std::make_unique<ReplaceStringStep>(p["String"].get<std::string>(), content));
    } else if (p.is_object() && p.contains("Regex") && p["Regex"].is_string()) {
      steps->push_back(
          std::make_unique<ReplaceRegexStep>(p["Regex"].get<std::string>(), content, source));
    } else {
      throw bad("Replace needs a pattern {\"String\": ...} or {\"Regex\": ...}");
    }
  } else if (type == "Sequence") {
    if (!j.contains("normalizers") || !j["normalizers"].is_array()) {
      throw bad("Sequence needs a \"normalizers\" list");
    }
    for (const json& s : j["normalizers"]) parse_step(s, source, steps);
  } else {
    throw bad("type '" + type + "' is not supported");
  }
}

}  // namespace

TextNormalizer::~TextNormalizer() = default;

std::shared_ptr<const TextNormalizer> TextNormalizer::from_json(const std::string& json_text,
                                                                const std::string& source) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {
    throw Error("tokenizer file " + source + ": normalizer is not valid JSON: " + e.what());
  }
  std::shared_ptr<TextNormalizer> n(new TextNormalizer());
  parse_step(j, source, &n->steps_);
  n->spec_ = j.dump();
  return n;
}

std::string TextNormalizer::apply(std::string_view text) const {
  // Valid UTF-8 runs go through the steps; invalid bytes are copied as they are.
  std::string out;
  out.reserve(text.size());
  const auto* base = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  size_t run_start = 0, off = 0;
  auto flush = [&](size_t end) {
    if (end <= run_start) return;
    std::string run(text.substr(run_start, end - run_start));
    for (const auto& step : steps_) run = step->run(run);
    out += run;
  };
  while (off < text.size()) {
    utf8proc_int32_t cp = 0;
    const auto n =
        utf8proc_iterate(base + off, static_cast<utf8proc_ssize_t>(text.size() - off), &cp);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    flush(off);
    out += text[off];  // an invalid byte, kept
    run_start = ++off;
  }
  flush(off);
  return out;
}

}  // namespace lmtrain::data
