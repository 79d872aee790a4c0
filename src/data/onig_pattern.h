// Hugging Face `tokenizers` runs its Split and Replace regexes with Oniguruma; lmtrain runs them
// with PCRE2. Under PCRE2_UCP both engines agree on \p{L}, \p{N}, \p{M} and \d, but not on
// \w and \s: Oniguruma's \w is Alphabetic | Mark | Decimal_Number | Connector_Punctuation
// (plus ² ³ ¹ ¼ ½ ¾ outside character classes), so "é" written e + U+0301 or
// "❤️" (U+2764 U+FE0F) is one word there; PCRE2 10.42's \w is [\p{L}\p{N}_], no marks. And
// Oniguruma's \s is White_Space, where PCRE2 adds U+180E. PCRE2 has no option that redefines
// \w (10.43's UCP \w adds only Mn and Pc), so the pattern is rewritten instead: each \w \W \s
// \S \b \B becomes the explicit class, inside and outside character classes.
// Code points assigned after the Unicode version of the PCRE2 tables (14.0 in 10.42) can still
// differ: Oniguruma knows them, PCRE2 treats them as unassigned.
#pragma once
#include <string>
#include <string_view>

namespace lmtrain::data {

// `pattern` (Oniguruma / tokenizers syntax, the subset PCRE2 shares) with its Unicode class
// escapes spelled out for PCRE2 with PCRE2_UTF | PCRE2_UCP. Everything else is copied as is.
std::string pcre2_pattern_for_onig(std::string_view pattern);

}  // namespace lmtrain::data
