// BpeMergeTable: the merge ranks of a BpeTokenizer, looked up on every merge step of bpe()
// (bpe_tokenizer_merge.cpp) and filled by the constructor (bpe_tokenizer_build.cpp).
// Internal to data/: a header of its own because BpeTokenizer::Model (bpe_tokenizer_model.h)
// holds one and both of those files read it; bpe_tokenizer.h's API does not show it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace lmtrain::data {

// The merge ranks: (left, right) -> rank << 32 | merged id, in an open-addressing table (linear
// probing, a power-of-two size at most half full). The hot lookup of bpe(); std::unordered_map
// costs a division and a pointer chase per lookup.
class BpeMergeTable {
 public:
  static constexpr uint64_t kNone = UINT64_MAX;

  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    slots_.assign(cap, {kEmpty, kNone});
    mask_ = cap - 1;
  }
  // Keeps the first value of a key (a duplicated merge keeps its lowest rank).
  void emplace(uint64_t key, uint64_t value) {
    for (size_t i = slot(key);; i = (i + 1) & mask_) {
      if (slots_[i].first == key) return;
      if (slots_[i].first == kEmpty) {
        slots_[i] = {key, value};
        return;
      }
    }
  }
  uint64_t find(uint64_t key) const {
    for (size_t i = slot(key);; i = (i + 1) & mask_) {
      if (slots_[i].first == key) return slots_[i].second;
      if (slots_[i].first == kEmpty) return kNone;
    }
  }

 private:
  // No pair key is all ones: ids are < 2^32 - 1 (the vocabulary size is checked).
  static constexpr uint64_t kEmpty = UINT64_MAX;
  size_t slot(uint64_t key) const {
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ULL) >> 20) & mask_;
  }
  std::vector<std::pair<uint64_t, uint64_t>> slots_;
  size_t mask_ = 0;
};

}  // namespace lmtrain::data
