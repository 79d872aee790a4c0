// BpeTokenizer::Model: the immutable state a BpeTokenizer shares between its copies, and the
// digest of it (bpe_tokenizer_hash.cpp). The tokenizer's parts, each in a file of its own:
//   bpe_tokenizer_build.cpp   the constructor: the vocabulary checked, merge ranks, end of text
//   bpe_tokenizer_hash.cpp    the stable digest of tokens, merges, specials and options
//   bpe_tokenizer_vocab.cpp   the accessors, special tokens, token_bytes and decode
//   bpe_tokenizer_encode.cpp  encode: normalizer, prefix space, pre-tokens, specials, the memo
//   bpe_tokenizer_merge.cpp   bpe(): the merges applied to one pre-token
//   bpe_tokenizer_files.cpp   the file formats (GPT-2, tokenizer.json), through the public API
// Internal to data/: defined here, not in bpe_tokenizer.h, so that the public header keeps the
// model opaque (its users see only BpeTokenizer's API); the namespace keeps tokenizer_hash off
// data's own names.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "data/bpe_merge_table.h"
#include "data/bpe_pair.h"
#include "data/bpe_tokenizer.h"
#include "data/pretokenizer.h"

namespace lmtrain::data {

struct BpeTokenizer::Model {
  std::vector<std::string> tokens;
  std::vector<Merge> merges;
  std::vector<SpecialToken> specials;
  std::vector<bool> special_flag;
  BpeOptions options;
  Pretokenizer pretok;
  // (left, right) -> rank << 32 | merged id
  BpeMergeTable merge_map;
  std::unordered_map<std::string, uint32_t> bytes_to_id;  // non-special tokens
  std::array<uint32_t, 256> byte_id{};
  std::optional<uint32_t> eot;
  std::string hash;

  explicit Model(const std::string& pattern) : pretok(pattern) {}

  uint64_t lookup(uint32_t a, uint32_t b) const { return merge_map.find(bpe_pair_key(a, b)); }
};

namespace bpe_detail {

// Stable 16-hex-digit FNV-1a digest of tokens, merges, special tokens and pre-tokenizer options
// (BpeTokenizer::hash()); `tokens` already hold the specials' contents.
std::string tokenizer_hash(const BpeOptions& options, const std::vector<std::string>& tokens,
                           const std::vector<BpeTokenizer::Merge>& merges,
                           const std::vector<SpecialToken>& specials);

}  // namespace bpe_detail

}  // namespace lmtrain::data
