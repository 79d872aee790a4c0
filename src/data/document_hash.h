// A document's 64-bit content hash and the decisions prepare derives from it: which split it
// goes to, and its place in the tokenizer's training sample. Both depend on the text (and the
// seed) alone, not on where the document sits in the corpus or on the thread count, so a
// duplicated document always lands in the same split (no validation text leaks into training
// through a copy) and the sample is the same however the corpus is read.
#pragma once
#include <cstdint>
#include <cstring>
#include <string_view>

#include "core/seed_mix.h"

namespace lmtrain::data {

// Reads 8 bytes at a time (little-endian loads: the shards assume a little-endian host too)
// and mixes each into the state with one multiply; splitmix64 finishes it. Stable across
// platforms and versions: prepared splits depend on it.
inline uint64_t document_hash(std::string_view text) {
  uint64_t h = 0x243F6A8885A308D3ULL ^ (text.size() * 0x9E3779B97F4A7C15ULL);
  size_t i = 0;
  for (; i + 8 <= text.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, text.data() + i, 8);
    h = (h ^ w) * 0xBF58476D1CE4E5B9ULL;
    h ^= h >> 29;
  }
  uint64_t tail = 0;
  for (size_t k = 0; i + k < text.size(); ++k) {
    tail |= static_cast<uint64_t>(static_cast<unsigned char>(text[i + k])) << (8 * k);
  }
  h = (h ^ tail) * 0xBF58476D1CE4E5B9ULL;
  return core::splitmix64(h);
}

// True when a document of hash `doc_hash` belongs to the validation split: its hash mixed with
// the seed falls in the lowest `val_fraction` of the 64-bit range.
inline bool is_val_document(uint64_t doc_hash, uint64_t seed, double val_fraction) {
  const uint64_t u = core::mix_seed(doc_hash, seed, 0x56414C);  // "VAL"
  return static_cast<double>(u >> 11) * 0x1.0p-53 < val_fraction;
}

// A training document's place in the tokenizer sample: prepare keeps the documents with the
// smallest keys that fit in --tokenizer_train_bytes (a uniform sample of the documents).
inline uint64_t sample_key(uint64_t doc_hash, uint64_t seed) {
  return core::mix_seed(doc_hash, seed, 0x544F4B);  // "TOK"
}

}  // namespace lmtrain::data
