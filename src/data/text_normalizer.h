// The `normalizer` of a Hugging Face tokenizer.json, applied before pre-tokenization as the
// `tokenizers` library does (to the text between special tokens). Real tokenizers need it:
// Qwen2/Qwen2.5 use NFC, so a decomposed "cafe" + U+0301 must encode like the precomposed
// "café". Unicode normalisation and case mapping come from utf8proc (Debian's libutf8proc), the
// Replace regex from PCRE2, never hand-written tables.
//
// Supported: NFC, NFD, NFKC, NFKD, Lowercase, Strip (left/right), StripAccents, Replace (String
// or Regex pattern, literal content), Prepend, Sequence of these. Anything else is refused when
// the tokenizer is loaded, naming the type: an ignored normalizer silently encodes differently.
// Lowercase maps code point by code point (utf8proc_tolower: Unicode's simple case mapping);
// `tokenizers` uses Rust's full mapping, which differs only for the few characters with special
// casing (e.g. U+0130, and a final capital sigma).
//
// Text that is not valid UTF-8 is normalised run by run: invalid bytes are left as they are
// (the byte-level BPE encodes them as byte tokens), so encoding stays total.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lmtrain::data {

class TextNormalizer {
 public:
  // Parses the JSON text of a tokenizer.json "normalizer" value (an object; null is no
  // normalizer and should not get here). Throws lmtrain::Error naming `source` and the
  // unsupported type or bad field.
  static std::shared_ptr<const TextNormalizer> from_json(const std::string& json_text,
                                                         const std::string& source);
  ~TextNormalizer();

  std::string apply(std::string_view text) const;
  // The normalizer's JSON as read (compact): written back by save_hf, part of the tokenizer hash.
  const std::string& spec() const { return spec_; }

  struct Step;

 private:
  TextNormalizer() = default;
  std::string spec_;
  std::vector<std::unique_ptr<Step>> steps_;
};

}  // namespace lmtrain::data
