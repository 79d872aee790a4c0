// Byte-level BPE tokenizer, compatible with GPT-2 (encoder.json + vocab.bpe) and Hugging Face
// `tokenizers` BPE models with a ByteLevel pre-tokenizer (tokenizer.json).
//
// Internally every token is a byte string; the GPT-2 byte->unicode alphabet only appears in the
// files. encode() works on arbitrary bytes (invalid UTF-8, NUL, ...) and decode(encode(x)) == x.
// The object is immutable after construction and safe to use from several threads.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "data/pretokenizer.h"
#include "data/text_normalizer.h"

namespace lmtrain::data {

struct SpecialToken {
  std::string content;  // exact text, e.g. "<|endoftext|>"
  uint32_t id = 0;
};

// The end-of-text marker appended after every document.
extern const char* const kEndOfText;

struct BpeOptions {
  std::string pattern = kGpt2Pattern;  // pre-tokenizer regex
  // Hugging Face `ignore_merges` (Llama 3): a pre-token that is itself in the vocabulary is
  // emitted as one token without running merges.
  bool ignore_merges = false;
  // Hugging Face ByteLevel `add_prefix_space`: a text (or each stretch between special tokens)
  // that does not start with ' ' is encoded as if it did (tokenizers' ByteLevel() default).
  bool add_prefix_space = false;
  // The pre_tokenizer is Sequence[Split(pattern), ByteLevel(use_regex=false)] (Qwen, Llama 3)
  // rather than ByteLevel(use_regex) alone. With add_prefix_space the space then goes before
  // every piece of the Split that does not start with one, as `tokenizers` does ("Hello, world"
  // -> "ĠHello", "Ġ,", "Ġworld"), not once per stretch.
  bool split_pretokenizer = false;
  // The tokenizer.json `normalizer` (text_normalizer.h), applied to the text between special
  // tokens before pre-tokenization; null for none.
  std::shared_ptr<const TextNormalizer> normalizer;
};

class BpeTokenizer {
 public:
  using Merge = std::pair<uint32_t, uint32_t>;  // (left id, right id), rank = index

  // tokens[id] = bytes of token `id` (for special tokens: their content). `merges` are in rank
  // order; each merge's concatenated bytes must be a non-special token. Every single byte must
  // be a token. Throws lmtrain::Error when these do not hold.
  BpeTokenizer(std::vector<std::string> tokens, std::vector<Merge> merges,
               std::vector<SpecialToken> specials, BpeOptions options = {});

  // GPT-2's original files. "<|endoftext|>" is special (added after the vocab if absent).
  static BpeTokenizer load_gpt2(const std::string& encoder_json_path,
                                const std::string& vocab_bpe_path);
  // Hugging Face tokenizer.json (model.type BPE, ByteLevel pre-tokenizer). added_tokens become
  // special tokens; merges may be "a b" strings or ["a", "b"] pairs.
  static BpeTokenizer load_hf(const std::string& tokenizer_json_path);
  // tokenizer.json file, or a directory holding tokenizer.json or encoder.json + vocab.bpe.
  static BpeTokenizer load(const std::string& path);
  // Writes a Hugging Face tokenizer.json that load_hf() (and `tokenizers`) read back.
  void save_hf(const std::string& path) const;

  // Plain encoding: special-token text in `text` is encoded as ordinary bytes.
  std::vector<uint32_t> encode(std::string_view text) const;
  // Appends the ids of `text` to *out (avoids a copy when encoding many documents).
  void encode_append(std::string_view text, std::vector<uint32_t>* out) const;
  // Like encode(), but occurrences of special-token text become the special ids.
  std::vector<uint32_t> encode_with_special(std::string_view text) const;

  // Concatenated token bytes (may be invalid UTF-8). Throws on an id >= vocab_size().
  std::string decode(const std::vector<uint32_t>& ids) const;
  std::string decode(const uint32_t* ids, size_t n) const;
  const std::string& token_bytes(uint32_t id) const;

  size_t vocab_size() const;
  const std::vector<Merge>& merges() const;
  const std::vector<SpecialToken>& special_tokens() const;
  std::optional<uint32_t> special_id(std::string_view content) const;
  bool is_special(uint32_t id) const;
  // "<|endoftext|>" (or the first of "<|end_of_text|>", "</s>", "<eos>"); throws if none.
  uint32_t eot_id() const;
  const BpeOptions& options() const;

  // Stable 16-hex-digit FNV-1a digest of tokens, merges, special tokens and pre-tokenizer;
  // independent of the file format the tokenizer was loaded from. Ties shards to a tokenizer.
  const std::string& hash() const;

 private:
  struct Model;
  struct Cache;
  void encode_word(std::string_view word, std::vector<uint32_t>* out) const;
  void bpe(std::string_view word, std::vector<uint32_t>* out) const;

  std::shared_ptr<const Model> model_;
  // Memo of pre-token -> ids; shared by copies, lock-free and thread-safe (bpe_tokenizer_cache.h).
  std::shared_ptr<Cache> cache_;
};

}  // namespace lmtrain::data
