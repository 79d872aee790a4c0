// Regex pre-tokenizer: splits text into the "words" that BPE merges never cross.
// Uses PCRE2 in UTF mode with PCRE2_MATCH_INVALID_UTF, so arbitrary bytes are accepted: runs
// of invalid UTF-8 (which no regex alternative can match) become pre-tokens of their own.
// Invariant: the pieces are non-empty, in order, and concatenate to the input exactly.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lmtrain::data {

// GPT-2's pattern (also Hugging Face ByteLevel's use_regex=true default).
extern const char* const kGpt2Pattern;

class Pretokenizer {
 public:
  // Compiles `pattern` (PCRE2 syntax, UTF + UCP). Throws lmtrain::Error if it does not compile
  // or can match the empty string.
  explicit Pretokenizer(const std::string& pattern = kGpt2Pattern);
  ~Pretokenizer();
  Pretokenizer(Pretokenizer&&) noexcept;
  Pretokenizer& operator=(Pretokenizer&&) noexcept;

  const std::string& pattern() const { return pattern_; }

  // Calls fn(piece) for every pre-token of `text`, in order. Thread-safe.
  void split(std::string_view text, const std::function<void(std::string_view)>& fn) const;
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  struct Impl;
  std::string pattern_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lmtrain::data
