#include "data/bpe_trainer.h"

#include <queue>

#include "core/error.h"
#include "core/log.h"
#include "core/progress.h"
#include "data/bpe_pair.h"

namespace lmtrain::data {
namespace {

uint32_t left_of(uint64_t key) { return static_cast<uint32_t>(key >> 32); }
uint32_t right_of(uint64_t key) { return static_cast<uint32_t>(key); }

struct Candidate {
  int64_t count;
  uint64_t pair;
};

}  // namespace

BpeTrainer::BpeTrainer(BpeTrainerOptions options)
    : options_(std::move(options)), pretok_(options_.pattern) {
  if (options_.vocab_size < 257) {
    throw Error("BPE vocab_size must be at least 257 (256 bytes + <|endoftext|>), got " +
                std::to_string(options_.vocab_size));
  }
}

void BpeTrainer::add_document(std::string_view text) {
  pretok_.split(text, [&](std::string_view w) {
    ++word_counts_[std::string(w)];
    ++total_words_;
  });
}

BpeTokenizer BpeTrainer::train() {
  // Words as symbol sequences, with their corpus frequency. Sorting makes the word order (and so
  // everything below) independent of hash-map iteration order.
  std::vector<std::pair<std::string, uint64_t>> sorted(word_counts_.begin(), word_counts_.end());
  std::sort(sorted.begin(), sorted.end());
  words_.assign(sorted.size(), {});
  std::vector<int64_t> freq(sorted.size());
  word_index_.clear();
  for (size_t w = 0; w < sorted.size(); ++w) {
    const std::string& s = sorted[w].first;
    words_[w].assign(reinterpret_cast<const unsigned char*>(s.data()),
                     reinterpret_cast<const unsigned char*>(s.data()) + s.size());
    freq[w] = static_cast<int64_t>(sorted[w].second);
    word_index_.emplace(s, static_cast<uint32_t>(w));
  }

  std::vector<std::string> tokens(256);
  for (int b = 0; b < 256; ++b) tokens[b] = std::string(1, static_cast<char>(b));
  std::unordered_map<std::string, uint32_t> token_id;
  for (uint32_t b = 0; b < 256; ++b) token_id.emplace(tokens[b], b);

  // pair -> number of adjacent occurrences over the corpus; pair -> words that (may) hold it.
  std::unordered_map<uint64_t, int64_t> pair_count;
  std::unordered_map<uint64_t, std::vector<uint32_t>> where;
  for (size_t w = 0; w < words_.size(); ++w) {
    const auto& s = words_[w];
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      const uint64_t p = bpe_pair_key(s[i], s[i + 1]);
      pair_count[p] += freq[w];
      auto& list = where[p];
      if (list.empty() || list.back() != w) list.push_back(static_cast<uint32_t>(w));
    }
  }

  // Max-heap by count; ties: lexicographically smallest (left bytes, right bytes). Entries go
  // stale when counts drop; a popped entry whose count is outdated is re-queued (lazy update).
  auto worse = [&tokens](const Candidate& x, const Candidate& y) {
    if (x.count != y.count) return x.count < y.count;
    const std::string& xl = tokens[left_of(x.pair)];
    const std::string& yl = tokens[left_of(y.pair)];
    if (xl != yl) return xl > yl;
    return tokens[right_of(x.pair)] > tokens[right_of(y.pair)];
  };
  std::priority_queue<Candidate, std::vector<Candidate>, decltype(worse)> heap(worse);
  for (const auto& [p, c] : pair_count) heap.push({c, p});

  std::vector<BpeTokenizer::Merge> merges;
  const size_t target = options_.vocab_size - 1;  // last id is <|endoftext|>
  std::vector<uint32_t> stamp(words_.size(), UINT32_MAX);
  std::vector<uint32_t> merged;
  std::vector<uint64_t> touched;
  while (tokens.size() < target && !heap.empty()) {
    const Candidate top = heap.top();
    heap.pop();
    const int64_t actual = pair_count[top.pair];
    if (actual != top.count) {
      if (actual > 0) heap.push({actual, top.pair});
      continue;
    }
    if (actual < static_cast<int64_t>(options_.min_pair_count)) break;

    const uint32_t a = left_of(top.pair), b = right_of(top.pair);
    std::string bytes = tokens[a] + tokens[b];
    // Two different merges can spell the same bytes (a+bc and ab+c); they share one token.
    uint32_t id;
    auto found = token_id.find(bytes);
    if (found != token_id.end()) {
      id = found->second;
    } else {
      id = static_cast<uint32_t>(tokens.size());
      token_id.emplace(bytes, id);
      tokens.push_back(std::move(bytes));
    }
    merges.emplace_back(a, b);
    if (progress_) progress_->set(static_cast<int64_t>(merges.size()));

    const uint32_t step = static_cast<uint32_t>(merges.size());
    std::vector<uint32_t> list = std::move(where[top.pair]);
    where.erase(top.pair);
    touched.clear();
    for (uint32_t w : list) {
      if (stamp[w] == step) continue;
      stamp[w] = step;
      auto& s = words_[w];
      // Replace every non-overlapping occurrence, left to right.
      merged.clear();
      for (size_t i = 0; i < s.size();) {
        if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
          merged.push_back(id);
          i += 2;
        } else {
          merged.push_back(s[i]);
          ++i;
        }
      }
      if (merged.size() == s.size()) continue;  // stale index entry
      // Re-count this word's pairs: simple and exact, including overlaps like "a a a".
      for (size_t i = 0; i + 1 < s.size(); ++i) pair_count[bpe_pair_key(s[i], s[i + 1])] -= freq[w];
      for (size_t i = 0; i + 1 < merged.size(); ++i) {
        const uint64_t p = bpe_pair_key(merged[i], merged[i + 1]);
        pair_count[p] += freq[w];
        if (merged[i] == id || merged[i + 1] == id) {
          auto& l = where[p];
          if (l.empty() || l.back() != w) l.push_back(w);
          touched.push_back(p);
        }
      }
      s.swap(merged);
    }
    pair_count.erase(top.pair);
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (uint64_t p : touched) {
      const int64_t c = pair_count[p];
      if (c > 0) heap.push({c, p});
    }
  }
  if (tokens.size() < target) {
    log::warn(log::format("BPE training ran out of pairs: vocabulary has %zu tokens, not %zu",
                          tokens.size() + 1, options_.vocab_size));
  }
  const uint32_t eot = static_cast<uint32_t>(tokens.size());
  tokens.push_back(kEndOfText);
  BpeOptions bpe_options;
  bpe_options.pattern = options_.pattern;
  return BpeTokenizer(std::move(tokens), std::move(merges), {{kEndOfText, eot}},
                      std::move(bpe_options));
}

std::vector<uint32_t> BpeTrainer::segmentation(std::string_view word) const {
  auto it = word_index_.find(std::string(word));
  if (it == word_index_.end()) return {};
  return words_[it->second];
}

BpeTokenizer train_bpe(const std::vector<std::string>& docs, size_t vocab_size) {
  BpeTrainerOptions options;
  options.vocab_size = vocab_size;
  BpeTrainer trainer(options);
  for (const std::string& d : docs) trainer.add_document(d);
  return trainer.train();
}

}  // namespace lmtrain::data
