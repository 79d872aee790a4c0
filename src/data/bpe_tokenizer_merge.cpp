// BpeTokenizer::bpe(): the merges applied to one pre-token, by a simple scan for short words and
// a heap for long ones, so that a pathological pre-token cannot stall encoding.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <queue>
#include <string_view>
#include <utility>
#include <vector>

#include "data/bpe_tokenizer.h"
#include "data/bpe_tokenizer_model.h"

namespace lmtrain::data {
namespace {

// Words longer than this use the O(n log n) heap merge instead of the simple O(n^2) scan, so a
// pathological pre-token (a megabyte of letters) cannot stall encoding.
constexpr size_t kLongWord = 128;

}  // namespace

// Applies merges to one pre-token: repeatedly merge the adjacent pair with the lowest rank (the
// leftmost one on ties). This is the Hugging Face order and gives GPT-2's result for any merge
// list produced by training.
void BpeTokenizer::bpe(std::string_view word, std::vector<uint32_t>* out) const {
  const Model& m = *model_;
  const size_t n = word.size();
  if (n <= kLongWord) {
    uint32_t ids[kLongWord];
    uint64_t info[kLongWord];  // info[i]: merge info of (ids[i], ids[i+1]); UINT64_MAX: none
    for (size_t i = 0; i < n; ++i) ids[i] = m.byte_id[static_cast<unsigned char>(word[i])];
    size_t len = n;
    for (size_t i = 0; i + 1 < len; ++i) info[i] = m.lookup(ids[i], ids[i + 1]);
    while (len > 1) {
      size_t best = 0;
      for (size_t i = 1; i + 1 < len; ++i) {
        if ((info[i] >> 32) < (info[best] >> 32)) best = i;
      }
      if (info[best] == UINT64_MAX) break;
      ids[best] = static_cast<uint32_t>(info[best]);
      for (size_t i = best + 1; i + 1 < len; ++i) ids[i] = ids[i + 1];
      for (size_t i = best + 1; i + 2 < len; ++i) info[i] = info[i + 1];
      --len;
      if (best > 0) info[best - 1] = m.lookup(ids[best - 1], ids[best]);
      if (best + 1 < len) info[best] = m.lookup(ids[best], ids[best + 1]);
    }
    out->insert(out->end(), ids, ids + len);
    return;
  }

  // Long words: doubly linked symbols + a min-heap of (rank, position) candidates; entries made
  // stale by earlier merges are skipped when popped.
  std::vector<uint32_t> ids(n);
  std::vector<int64_t> prev(n), next(n);
  std::vector<bool> alive(n, true);
  using Cand = std::pair<uint32_t, uint32_t>;  // (rank, left position)
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  for (size_t i = 0; i < n; ++i) {
    ids[i] = m.byte_id[static_cast<unsigned char>(word[i])];
    prev[i] = static_cast<int64_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int64_t>(i) + 1 : -1;
  }
  auto push = [&](int64_t i) {
    if (i < 0 || next[i] < 0) return;
    const uint64_t info = m.lookup(ids[i], ids[next[i]]);
    if (info != UINT64_MAX)
      heap.emplace(static_cast<uint32_t>(info >> 32), static_cast<uint32_t>(i));
  };
  for (size_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const auto [rank, i] = heap.top();
    heap.pop();
    if (!alive[i] || next[i] < 0) continue;
    const uint64_t info = m.lookup(ids[i], ids[next[i]]);
    if (info == UINT64_MAX || (info >> 32) != rank) continue;  // stale candidate
    const int64_t r = next[i];
    ids[i] = static_cast<uint32_t>(info);
    alive[r] = false;
    next[i] = next[r];
    if (next[r] >= 0) prev[next[r]] = i;
    push(prev[i]);
    push(i);
  }
  for (int64_t i = 0; i >= 0; i = next[i]) out->push_back(ids[i]);
}

}  // namespace lmtrain::data
