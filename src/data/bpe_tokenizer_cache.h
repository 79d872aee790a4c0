// BpeTokenizer::Cache: the memo of pre-token -> ids that encode_word() (bpe_tokenizer_encode.cpp)
// reads and fills, and that the constructor (bpe_tokenizer_build.cpp) creates.
// Internal to data/: defined in a header because those two files need its definition (the
// constructor makes one, encode_word() calls it); bpe_tokenizer.h only declares it.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include "data/bpe_tokenizer.h"

namespace lmtrain::data {

// Memo of pre-token -> ids, shared by every thread that encodes with the tokenizer (prepare and
// the stream loader encode each chunk on a new thread, so a per-thread memo would start cold
// every time): a direct-mapped table of 64-byte slots, each holding a short word and its ids
// inline, so a hit costs one hash and one cache line and allocates nothing. A slot is simply
// overwritten on a collision. Lock-free: each slot is a seqlock (readers copy the slot and retry
// nothing: a slot being written or rewritten meanwhile is a miss), and all of it is atomic words
// so that concurrent reads and writes are well defined. Words longer than kWordBytes, or that
// encode to more than kIds ids, are not memoized.
struct BpeTokenizer::Cache {
  static constexpr size_t kWordBytes = 24;
  static constexpr size_t kIds = 8;
  static constexpr int kSlotBits = 16;  // 65536 slots, 4 MiB
  // w[0]: sequence (bits 0-31, odd while being written) | word length << 32 | id count << 40;
  // w[1..3]: the word's bytes, zero-padded; w[4..7]: the ids, two per word. All zero: empty.
  struct alignas(64) Slot {
    std::atomic<uint64_t> w[8];
  };
  // The word zero-padded into three 64-bit words, and its hash.
  struct Key {
    uint64_t w[3] = {0, 0, 0};
    uint64_t hash = 0;
    explicit Key(std::string_view word) {
      std::memcpy(w, word.data(), word.size());
      uint64_t h = word.size() * 0x9E3779B97F4A7C15ULL;
      for (uint64_t v : w) {
        h = (h ^ v) * 0xbf58476d1ce4e5b9ULL;
        h ^= h >> 31;
      }
      hash = h * 0x94d049bb133111ebULL;
    }
  };

  std::unique_ptr<Slot[]> slots{new Slot[size_t{1} << kSlotBits]};

  Cache() {
    for (size_t i = 0; i < (size_t{1} << kSlotBits); ++i) {
      for (auto& x : slots[i].w) x.store(0, std::memory_order_relaxed);
    }
  }
  // The top bits: the best mixed of a product.
  Slot& slot(const Key& k) { return slots[k.hash >> (64 - kSlotBits)]; }

  // Appends the memoized ids of the word to *out; false when they are not there.
  bool find(const Key& k, size_t len, std::vector<uint32_t>* out) {
    Slot& s = slot(k);
    const uint64_t head = s.w[0].load(std::memory_order_acquire);
    if ((head & 1) || ((head >> 32) & 0xff) != len) return false;
    for (int i = 0; i < 3; ++i) {
      if (s.w[1 + i].load(std::memory_order_relaxed) != k.w[i]) return false;
    }
    uint64_t ids[4];
    for (int i = 0; i < 4; ++i) ids[i] = s.w[4 + i].load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.w[0].load(std::memory_order_relaxed) != head) return false;  // rewritten meanwhile
    const size_t n = (head >> 40) & 0xff;
    for (size_t i = 0; i < n; ++i)
      out->push_back(static_cast<uint32_t>(ids[i / 2] >> (32 * (i % 2))));
    return true;
  }

  // Memoizes ids[0, n) for the word, unless another thread is writing the slot.
  void store(const Key& k, size_t len, const uint32_t* ids, size_t n) {
    if (n > kIds) return;
    Slot& s = slot(k);
    uint64_t head = s.w[0].load(std::memory_order_relaxed);
    if ((head & 1) || !s.w[0].compare_exchange_strong(head, head + 1, std::memory_order_relaxed)) {
      return;
    }
    std::atomic_thread_fence(std::memory_order_release);
    for (int i = 0; i < 3; ++i) s.w[1 + i].store(k.w[i], std::memory_order_relaxed);
    uint64_t packed[4] = {0, 0, 0, 0};
    for (size_t i = 0; i < n; ++i) packed[i / 2] |= static_cast<uint64_t>(ids[i]) << (32 * (i % 2));
    for (int i = 0; i < 4; ++i) s.w[4 + i].store(packed[i], std::memory_order_relaxed);
    const uint64_t seq = (head + 2) & 0xffffffffULL;
    s.w[0].store(seq | static_cast<uint64_t>(len) << 32 | static_cast<uint64_t>(n) << 40,
                 std::memory_order_release);
  }
};

}  // namespace lmtrain::data
