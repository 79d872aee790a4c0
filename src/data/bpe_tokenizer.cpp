#include "data/bpe_tokenizer.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <functional>
#include <queue>
#include <unordered_map>

#include "core/error.h"
#include "core/log.h"
#include "data/bpe_pair.h"
#include "data/byte_level.h"

namespace lmtrain::data {

const char* const kEndOfText = "<|endoftext|>";

namespace {

// Words longer than this use the O(n log n) heap merge instead of the simple O(n^2) scan, so a
// pathological pre-token (a megabyte of letters) cannot stall encoding.
constexpr size_t kLongWord = 128;

class Fnv1a {
 public:
  void bytes(const void* p, size_t n) {
    const auto* s = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h_ = (h_ ^ s[i]) * 0x100000001b3ULL;
  }
  void u64(uint64_t v) {
    unsigned char b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
    bytes(b, 8);
  }
  void str(std::string_view s) {
    u64(s.size());
    bytes(s.data(), s.size());
  }
  std::string hex() const {
    char buf[17];
    snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h_));
    return buf;
  }

 private:
  uint64_t h_ = 0xcbf29ce484222325ULL;
};

}  // namespace

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

BpeTokenizer::BpeTokenizer(std::vector<std::string> tokens, std::vector<Merge> merges,
                           std::vector<SpecialToken> specials, BpeOptions options) {
  auto m = std::make_shared<Model>(options.pattern);
  m->options = std::move(options);
  m->tokens = std::move(tokens);
  m->merges = std::move(merges);
  m->specials = std::move(specials);
  const size_t n = m->tokens.size();
  if (n >= UINT32_MAX) throw Error("BPE vocabulary too large");
  m->special_flag.assign(n, false);
  for (const SpecialToken& s : m->specials) {
    if (s.id >= n) throw Error("special token " + s.content + " has id beyond the vocabulary");
    if (s.content.empty())
      throw Error("special token with id " + std::to_string(s.id) + " is empty");
    m->tokens[s.id] = s.content;
    m->special_flag[s.id] = true;
  }
  for (uint32_t id = 0; id < n; ++id) {
    if (!m->special_flag[id]) m->bytes_to_id.emplace(m->tokens[id], id);  // first id wins
  }
  for (int b = 0; b < 256; ++b) {
    auto it = m->bytes_to_id.find(std::string(1, static_cast<char>(b)));
    if (it == m->bytes_to_id.end()) {
      throw Error(
          log::format("BPE vocabulary has no token for byte 0x%02x, so not every input "
                      "could be encoded",
                      b));
    }
    m->byte_id[b] = it->second;
  }
  m->merge_map.reserve(m->merges.size());
  for (size_t r = 0; r < m->merges.size(); ++r) {
    const auto [a, b] = m->merges[r];
    if (a >= n || b >= n) throw Error("merge #" + std::to_string(r) + " refers to an unknown id");
    auto it = m->bytes_to_id.find(m->tokens[a] + m->tokens[b]);
    if (it == m->bytes_to_id.end()) {
      throw Error("merge #" + std::to_string(r) + " (" + bytes_to_unicode(m->tokens[a]) + " " +
                  bytes_to_unicode(m->tokens[b]) +
                  ") produces a token missing from the vocabulary");
    }
    // A duplicated merge keeps its first (lowest) rank, as in GPT-2 and Hugging Face.
    m->merge_map.emplace(bpe_pair_key(a, b), (static_cast<uint64_t>(r) << 32) | it->second);
  }
  for (const char* name : {kEndOfText, "<|end_of_text|>", "</s>", "<eos>"}) {
    for (const SpecialToken& s : m->specials) {
      if (!m->eot && s.content == name) m->eot = s.id;
    }
  }

  Fnv1a h;
  h.str("lmtrain-bpe-v1");
  h.str(m->options.pattern);
  h.u64(m->options.ignore_merges);
  // Each option only when set, so older tokenizers keep their hashes.
  if (m->options.add_prefix_space) h.str("add_prefix_space");
  if (m->options.add_prefix_space && m->options.split_pretokenizer) h.str("prefix_per_piece");
  if (m->options.normalizer) h.str("normalizer " + m->options.normalizer->spec());
  h.u64(n);
  for (const std::string& t : m->tokens) h.str(t);
  h.u64(m->merges.size());
  for (const Merge& mg : m->merges) h.u64(bpe_pair_key(mg.first, mg.second));
  h.u64(m->specials.size());
  for (const SpecialToken& s : m->specials) {
    h.u64(s.id);
    h.str(s.content);
  }
  m->hash = h.hex();
  model_ = std::move(m);
  cache_ = std::make_shared<Cache>();
}

size_t BpeTokenizer::vocab_size() const { return model_->tokens.size(); }
const std::vector<BpeTokenizer::Merge>& BpeTokenizer::merges() const { return model_->merges; }
const std::vector<SpecialToken>& BpeTokenizer::special_tokens() const { return model_->specials; }
const BpeOptions& BpeTokenizer::options() const { return model_->options; }
const std::string& BpeTokenizer::hash() const { return model_->hash; }

bool BpeTokenizer::is_special(uint32_t id) const {
  return id < model_->special_flag.size() && model_->special_flag[id];
}

std::optional<uint32_t> BpeTokenizer::special_id(std::string_view content) const {
  for (const SpecialToken& s : model_->specials) {
    if (s.content == content) return s.id;
  }
  return std::nullopt;
}

uint32_t BpeTokenizer::eot_id() const {
  if (!model_->eot) throw Error("tokenizer has no end-of-text special token (<|endoftext|>)");
  return *model_->eot;
}

const std::string& BpeTokenizer::token_bytes(uint32_t id) const {
  if (id >= model_->tokens.size()) {
    throw Error("token id " + std::to_string(id) + " is outside the vocabulary (size " +
                std::to_string(model_->tokens.size()) + ")");
  }
  return model_->tokens[id];
}

std::string BpeTokenizer::decode(const uint32_t* ids, size_t n) const {
  std::string out;
  out.reserve(n * 4);
  for (size_t i = 0; i < n; ++i) out += token_bytes(ids[i]);
  return out;
}

std::string BpeTokenizer::decode(const std::vector<uint32_t>& ids) const {
  return decode(ids.data(), ids.size());
}

std::vector<uint32_t> BpeTokenizer::encode(std::string_view text) const {
  std::vector<uint32_t> out;
  out.reserve(text.size() / 3 + 8);
  encode_append(text, &out);
  return out;
}

void BpeTokenizer::encode_append(std::string_view text, std::vector<uint32_t>* out) const {
  const BpeOptions& o = model_->options;
  std::string normalized;
  if (o.normalizer) {
    normalized = o.normalizer->apply(text);
    text = normalized;
  }
  if (o.add_prefix_space && o.split_pretokenizer) {  // a space before every Split piece
    std::string spaced;
    model_->pretok.split(text, [&](std::string_view word) {
      if (word[0] == ' ') return encode_word(word, out);
      spaced.assign(1, ' ').append(word);
      encode_word(spaced, out);
    });
    return;
  }
  if (o.add_prefix_space && !text.empty() && text[0] != ' ') {
    const std::string prefixed = " " + std::string(text);
    model_->pretok.split(prefixed, [&](std::string_view word) { encode_word(word, out); });
    return;
  }
  model_->pretok.split(text, [&](std::string_view word) { encode_word(word, out); });
}

std::vector<uint32_t> BpeTokenizer::encode_with_special(std::string_view text) const {
  const auto& specials = model_->specials;
  std::vector<uint32_t> out;
  // next[i]: position of the next occurrence of special i at or after `pos` (npos: none).
  std::vector<size_t> next(specials.size(), 0);
  size_t pos = 0;
  for (size_t i = 0; i < specials.size(); ++i) next[i] = text.find(specials[i].content);
  while (pos < text.size()) {
    size_t best = std::string_view::npos, best_i = 0;
    for (size_t i = 0; i < specials.size(); ++i) {
      if (next[i] != std::string_view::npos && next[i] < pos) {
        next[i] = text.find(specials[i].content, pos);
      }
      // Earliest match wins; at the same position the longest special wins.
      if (next[i] < best || (next[i] == best && best != std::string_view::npos &&
                             specials[i].content.size() > specials[best_i].content.size())) {
        best = next[i];
        best_i = i;
      }
    }
    if (best == std::string_view::npos) break;
    encode_append(text.substr(pos, best - pos), &out);
    out.push_back(specials[best_i].id);
    pos = best + specials[best_i].content.size();
  }
  if (pos < text.size()) encode_append(text.substr(pos), &out);
  return out;
}

void BpeTokenizer::encode_word(std::string_view word, std::vector<uint32_t>* out) const {
  const Model& m = *model_;
  if (word.size() == 1) {
    out->push_back(m.byte_id[static_cast<unsigned char>(word[0])]);
    return;
  }
  if (m.options.ignore_merges) {
    auto it = m.bytes_to_id.find(std::string(word));
    if (it != m.bytes_to_id.end()) {
      out->push_back(it->second);
      return;
    }
  }
  if (word.size() > Cache::kWordBytes) {
    bpe(word, out);
    return;
  }
  const Cache::Key key(word);
  if (cache_->find(key, word.size(), out)) return;
  const size_t start = out->size();
  bpe(word, out);
  cache_->store(key, word.size(), out->data() + start, out->size() - start);
}

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
