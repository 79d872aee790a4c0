#include "data/onig_pattern.h"

namespace lmtrain::data {
namespace {

// Oniguruma's \w over Unicode, as the items of a character class (checked code point by code
// point against `tokenizers`: tests/data/pretokenizer_parity_test.cpp). Outside a class its \w,
// \W, \b and \B also count ² ³ ¹ ¼ ½ ¾ as word characters (its ISO-8859-1 table); inside one
// (`[\w']`, `[^\W\d]`) they are not.
constexpr std::string_view kWordItems = R"(\p{Alphabetic}\p{M}\p{Nd}\p{Pc})";
constexpr std::string_view kLatin1WordItems = R"(\x{B2}\x{B3}\x{B9}\x{BC}-\x{BE})";
constexpr std::string_view kSpace = R"(\p{White_Space})";
constexpr std::string_view kNotSpace = R"(\P{White_Space})";

// \w (or \W) as a class: outside a class with the Latin-1 extras, inside one without them.
std::string word_class(bool negated, bool outside_class) {
  return std::string(negated ? "[^" : "[") + std::string(kWordItems) +
         std::string(outside_class ? kLatin1WordItems : "") + "]";
}

// \b and \B by lookaround on the word class: PCRE2's own use its \w.
std::string word_boundary(bool negated) {
  const std::string w = word_class(false, true);
  const std::string after = "(?<=" + w + ")", not_after = "(?<!" + w + ")";
  const std::string before = "(?=" + w + ")", not_before = "(?!" + w + ")";
  return negated ? "(?:" + after + before + "|" + not_after + not_before + ")"
                 : "(?:" + after + not_before + "|" + not_after + before + ")";
}

// The length of the escape at p[i] == '\\' (with its {...} argument for \p \P \x \o \N \g \k).
size_t escape_length(std::string_view p, size_t i) {
  if (i + 1 >= p.size()) return p.size() - i;
  const char c = p[i + 1];
  if (std::string_view("pPxoNgk").find(c) != std::string_view::npos && i + 2 < p.size() &&
      p[i + 2] == '{') {
    const size_t close = p.find('}', i + 3);
    return close == std::string_view::npos ? p.size() - i : close + 1 - i;
  }
  return 2;
}

// A character class that starts at p[i] == '['. Returns its PCRE2 form and moves i past it.
// A class holding \W cannot be one PCRE2 class (the complement of a union), so it becomes a
// group: [P\W] -> (?:[P]|[^w]), [^P\W] -> (?:(?![P])[w]).
std::string translate_class(std::string_view p, size_t& i) {
  size_t j = i + 1;
  const bool negated = j < p.size() && p[j] == '^';
  if (negated) ++j;
  std::string items;
  bool not_word = false;
  bool first = true;
  for (; j < p.size(); first = false) {
    const char c = p[j];
    if (c == ']' && !first) break;                          // a ']' first in the class is a literal
    if (c == '[' && j + 1 < p.size() && p[j + 1] == ':') {  // POSIX [:alpha:]
      const size_t close = p.find(":]", j + 2);
      const size_t end = close == std::string_view::npos ? p.size() : close + 2;
      items.append(p.substr(j, end - j));
      j = end;
      continue;
    }
    if (c != '\\') {
      items.push_back(c);
      ++j;
      continue;
    }
    const size_t n = escape_length(p, j);
    const char e = n == 2 ? p[j + 1] : '\0';
    if (e == 'w') {
      items.append(kWordItems);
    } else if (e == 's') {
      items.append(kSpace);
    } else if (e == 'S') {
      items.append(kNotSpace);
    } else if (e == 'W') {
      not_word = true;
    } else {
      items.append(p.substr(j, n));
    }
    j += n;
  }
  if (j >= p.size()) {  // unclosed: left as it is, for PCRE2 to refuse with its message
    const std::string rest(p.substr(i));
    i = p.size();
    return rest;
  }
  i = j + 1;
  if (!not_word) return (negated ? "[^" : "[") + items + "]";
  if (items.empty()) return word_class(!negated, false);
  return negated ? "(?:(?![" + items + "])" + word_class(false, false) + ")"
                 : "(?:[" + items + "]|" + word_class(true, false) + ")";
}

}  // namespace

std::string pcre2_pattern_for_onig(std::string_view p) {
  std::string out;
  out.reserve(p.size() * 2);
  for (size_t i = 0; i < p.size();) {
    const char c = p[i];
    if (c == '[') {
      out += translate_class(p, i);
      continue;
    }
    if (c != '\\') {
      out.push_back(c);
      ++i;
      continue;
    }
    if (p.substr(i, 2) == "\\Q") {  // quoted text: copied up to and with its \E
      const size_t e = p.find("\\E", i + 2);
      const size_t end = e == std::string_view::npos ? p.size() : e + 2;
      out.append(p.substr(i, end - i));
      i = end;
      continue;
    }
    const size_t n = escape_length(p, i);
    switch (n == 2 ? p[i + 1] : '\0') {
      case 'w':
        out += word_class(false, true);
        break;
      case 'W':
        out += word_class(true, true);
        break;
      case 's':
        out += kSpace;
        break;
      case 'S':
        out += kNotSpace;
        break;
      case 'b':
        out += word_boundary(false);
        break;
      case 'B':
        out += word_boundary(true);
        break;
      default:
        out.append(p.substr(i, n));
    }
    i += n;
  }
  return out;
}

}  // namespace lmtrain::data
