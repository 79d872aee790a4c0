#include "data/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"
#include "data/onig_pattern.h"

namespace lmtrain::data {

const char* const kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}

// One match-data block per thread and pattern size; reused so split() allocates nothing per call.
struct MatchData {
  pcre2_match_data* md = nullptr;
  ~MatchData() { pcre2_match_data_free(md); }
};

}  // namespace

struct Pretokenizer::Impl {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Impl() { pcre2_code_free(code); }
};

Pretokenizer::Pretokenizer(const std::string& pattern) : pattern_(pattern), impl_(new Impl) {
  int err = 0;
  PCRE2_SIZE err_off = 0;
  // UCP: \d and \p{...} use Unicode properties; \w and \s are spelled out as Oniguruma
  // (Hugging Face `tokenizers`) defines them (data/onig_pattern.h).
  const std::string pcre2_pattern = pcre2_pattern_for_onig(pattern);
  impl_->code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pcre2_pattern.data()), pcre2_pattern.size(),
                    PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &err_off, nullptr);
  if (!impl_->code) {
    throw Error("pre-tokenizer regex does not compile at offset " + std::to_string(err_off) +
                (pcre2_pattern == pattern ? "" : " of its PCRE2 form " + pcre2_pattern) + ": " +
                pcre2_message(err) + " (pattern: " + pattern + ")");
  }
  uint32_t min_len = 0;
  pcre2_pattern_info(impl_->code, PCRE2_INFO_MINLENGTH, &min_len);
  if (min_len == 0) {
    // An empty match would stall the scan; no sensible pre-tokenizer pattern needs one.
    throw Error("pre-tokenizer regex can match the empty string: " + pattern);
  }
  // JIT is several times faster; it is optional (not all platforms support it).
  impl_->jit = pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE) == 0;
}

Pretokenizer::~Pretokenizer() = default;
Pretokenizer::Pretokenizer(Pretokenizer&&) noexcept = default;
Pretokenizer& Pretokenizer::operator=(Pretokenizer&&) noexcept = default;

void Pretokenizer::split(std::string_view text,
                         const std::function<void(std::string_view)>& fn) const {
  // Match data only needs room for the whole-match pair; one per thread keeps split() reentrant.
  thread_local MatchData tl;
  if (!tl.md) tl.md = pcre2_match_data_create(1, nullptr);
  pcre2_match_data* md = tl.md;

  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const size_t n = text.size();
  size_t pos = 0;
  while (pos < n) {
    const int rc = impl_->jit ? pcre2_jit_match(impl_->code, subject, n, pos, 0, md, nullptr)
                              : pcre2_match(impl_->code, subject, n, pos, 0, md, nullptr);
    size_t start, end;
    if (rc == PCRE2_ERROR_NOMATCH) {
      start = end = n;
    } else if (rc < 0) {
      throw Error("pre-tokenizer regex failed: " + pcre2_message(rc));
    } else {
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      start = ov[0];
      end = ov[1];
    }
    // Bytes the regex skipped are invalid UTF-8 (every valid character is matched by some
    // alternative of a sane pattern); they still must reach the byte-level BPE.
    if (start > pos) fn(text.substr(pos, start - pos));
    if (end > start) fn(text.substr(start, end - start));
    if (end <= pos) {
      // Only reachable with exotic patterns (\K, lookbehind); guard against an endless loop.
      throw Error("pre-tokenizer regex made no progress at byte " + std::to_string(pos));
    }
    pos = end;
  }
}

std::vector<std::string_view> Pretokenizer::split(std::string_view text) const {
  std::vector<std::string_view> out;
  split(text, [&](std::string_view piece) { out.push_back(piece); });
  return out;
}

}  // namespace lmtrain::data
