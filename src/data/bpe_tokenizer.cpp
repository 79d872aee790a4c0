#include "data/bpe_tokenizer.h"

#include <array>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <queue>
#include <unordered_map>

#include "core/error.h"
#include "core/log.h"
#include "data/byte_level.h"

namespace lmtrain::data {

const char* const kEndOfText = "<|endoftext|>";

namespace {

uint64_t pair_key(uint32_t a, uint32_t b) { return (static_cast<uint64_t>(a) << 32) | b; }

// Words longer than this use the O(n log n) heap merge instead of the simple O(n^2) scan, so a
// pathological pre-token (a megabyte of letters) cannot stall encoding.
constexpr size_t kLongWord = 128;
// Pre-tokens longer than this are not memoized (they are rare and would bloat the cache).
constexpr size_t kMaxCachedWord = 256;
constexpr size_t kCacheShards = 16;
constexpr size_t kCacheEntriesPerShard = 1 << 14;

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

struct BpeTokenizer::Model {
  std::vector<std::string> tokens;
  std::vector<Merge> merges;
  std::vector<SpecialToken> specials;
  std::vector<bool> special_flag;
  BpeOptions options;
  Pretokenizer pretok;
  // (left, right) -> rank << 32 | merged id
  std::unordered_map<uint64_t, uint64_t> merge_map;
  std::unordered_map<std::string, uint32_t> bytes_to_id;  // non-special tokens
  std::array<uint32_t, 256> byte_id{};
  std::optional<uint32_t> eot;
  std::string hash;

  explicit Model(const std::string& pattern) : pretok(pattern) {}

  uint64_t lookup(uint32_t a, uint32_t b) const {
    auto it = merge_map.find(pair_key(a, b));
    return it == merge_map.end() ? UINT64_MAX : it->second;
  }
};

struct BpeTokenizer::Cache {
  struct Shard {
    std::mutex mu;
    std::unordered_map<std::string, std::vector<uint32_t>> map;
  };
  std::array<Shard, kCacheShards> shards;
};

BpeTokenizer::BpeTokenizer(std::vector<std::string> tokens, std::vector<Merge> merges,
                           std::vector<SpecialToken> specials, BpeOptions options) {
  auto m = std::make_shared<Model>(options.pattern);
  m->options = std::move(options);
  m->tokens = std::move(tokens);
  m->merges = std::move(merges);
  m->specials = std::move(specials);
  const size_t n = m->tokens.size();
  if (n > UINT32_MAX) throw Error("BPE vocabulary too large");
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
  m->merge_map.reserve(m->merges.size() * 2);
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
    m->merge_map.emplace(pair_key(a, b), (static_cast<uint64_t>(r) << 32) | it->second);
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
  h.u64(n);
  for (const std::string& t : m->tokens) h.str(t);
  h.u64(m->merges.size());
  for (const Merge& mg : m->merges) h.u64(pair_key(mg.first, mg.second));
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
  if (word.size() > kMaxCachedWord) {
    bpe(word, out);
    return;
  }
  std::string key(word);
  Cache::Shard& shard = cache_->shards[std::hash<std::string>()(key) % kCacheShards];
  {
    std::lock_guard<std::mutex> lock(shard.mu);
    auto it = shard.map.find(key);
    if (it != shard.map.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t start = out->size();
  bpe(word, out);
  std::vector<uint32_t> ids(out->begin() + start, out->end());
  std::lock_guard<std::mutex> lock(shard.mu);
  // Bounded memory: a full shard is simply dropped; hot words come back immediately.
  if (shard.map.size() >= kCacheEntriesPerShard) shard.map.clear();
  shard.map.emplace(std::move(key), std::move(ids));
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

// ---------------------------------------------------------------------------------------------
// Files. Vocabulary strings in the files use the GPT-2 byte alphabet; tokens that are not in
// that alphabet (e.g. special tokens with unusual characters) are kept as their raw UTF-8.

namespace {

using nlohmann::json;

json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open tokenizer file " + path);
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw Error("tokenizer file " + path + " is not valid JSON: " + e.what());
  }
}

std::string token_from_file(const std::string& s) {
  std::string bytes;
  return unicode_to_bytes(s, &bytes) ? bytes : s;
}

// Vocabulary as read from a file: id -> file string, with a reverse map for merges.
struct FileVocab {
  std::vector<std::string> strings;
  std::vector<bool> present;
  std::unordered_map<std::string, uint32_t> ids;

  void add(const std::string& path, const std::string& s, int64_t id) {
    if (id < 0 || id > INT32_MAX) {
      throw Error("tokenizer file " + path + ": token " + s + " has invalid id " +
                  std::to_string(id));
    }
    if (static_cast<size_t>(id) >= strings.size()) {
      strings.resize(id + 1);
      present.resize(id + 1, false);
    }
    if (present[id] && strings[id] != s) {
      throw Error("tokenizer file " + path + ": id " + std::to_string(id) + " used by both " +
                  strings[id] + " and " + s);
    }
    strings[id] = s;
    present[id] = true;
    ids.emplace(s, static_cast<uint32_t>(id));
  }

  uint32_t id_of(const std::string& path, const std::string& where, const std::string& s) const {
    auto it = ids.find(s);
    if (it == ids.end()) {
      throw Error("tokenizer file " + path + ": " + where + " uses token '" + s +
                  "' that is not in the vocabulary");
    }
    return it->second;
  }

  std::vector<std::string> tokens(const std::string& path) const {
    std::vector<std::string> out(strings.size());
    for (size_t i = 0; i < strings.size(); ++i) {
      if (!present[i]) {
        throw Error("tokenizer file " + path + ": vocabulary has no token with id " +
                    std::to_string(i) + " (ids must be contiguous)");
      }
      out[i] = token_from_file(strings[i]);
    }
    return out;
  }
};

void read_vocab_object(const std::string& path, const json& obj, FileVocab* vocab) {
  if (!obj.is_object()) throw Error("tokenizer file " + path + ": vocabulary is not an object");
  for (const auto& [s, id] : obj.items()) {
    if (!id.is_number_integer()) {
      throw Error("tokenizer file " + path + ": id of token '" + s + "' is not an integer");
    }
    vocab->add(path, s, id.get<int64_t>());
  }
}

BpeTokenizer build(const std::string& path, std::vector<std::string> tokens,
                   std::vector<BpeTokenizer::Merge> merges, std::vector<SpecialToken> specials,
                   BpeOptions options) {
  try {
    return BpeTokenizer(std::move(tokens), std::move(merges), std::move(specials),
                        std::move(options));
  } catch (const Error& e) {
    throw Error("tokenizer file " + path + ": " + e.what());
  }
}

// Pre-tokenizer regex of a Hugging Face pre_tokenizer section: ByteLevel(use_regex) alone, or
// Sequence[Split(Regex, Isolated), ByteLevel(use_regex=false)] as in Qwen / Llama 3.
std::string hf_pattern(const std::string& path, const json& pt) {
  auto bad = [&](const std::string& why) {
    return Error("tokenizer file " + path + ": unsupported pre_tokenizer (" + why +
                 "); lmtrain supports ByteLevel or Sequence[Split, ByteLevel]");
  };
  if (!pt.is_object()) throw bad("missing");
  const std::string type = pt.value("type", "");
  if (type == "ByteLevel") {
    if (pt.value("add_prefix_space", false)) {
      log::warn("tokenizer " + path + ": ByteLevel add_prefix_space=true is ignored");
    }
    if (!pt.value("use_regex", true)) throw bad("ByteLevel without a regex");
    return kGpt2Pattern;
  }
  if (type == "Sequence" && pt.contains("pretokenizers") && pt["pretokenizers"].size() == 2) {
    const json& split = pt["pretokenizers"][0];
    const json& bl = pt["pretokenizers"][1];
    if (split.value("type", "") != "Split" || bl.value("type", "") != "ByteLevel") {
      throw bad("Sequence is not [Split, ByteLevel]");
    }
    if (split.value("behavior", "") != "Isolated" || split.value("invert", false)) {
      throw bad("Split behavior must be Isolated, not inverted");
    }
    if (!split.contains("pattern") || !split["pattern"].contains("Regex")) {
      throw bad("Split without a Regex pattern");
    }
    if (bl.value("use_regex", true)) throw bad("ByteLevel after Split must have use_regex=false");
    return split["pattern"]["Regex"].get<std::string>();
  }
  throw bad("type " + type);
}

}  // namespace

BpeTokenizer BpeTokenizer::load_gpt2(const std::string& encoder_json_path,
                                     const std::string& vocab_bpe_path) {
  FileVocab vocab;
  read_vocab_object(encoder_json_path, read_json(encoder_json_path), &vocab);

  std::ifstream in(vocab_bpe_path, std::ios::binary);
  if (!in) throw Error("cannot open merges file " + vocab_bpe_path);
  std::vector<Merge> merges;
  std::string line;
  for (size_t lineno = 1; std::getline(in, line); ++lineno) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (lineno == 1 && line.rfind("#version", 0) == 0)) continue;
    const size_t sp = line.find(' ');
    if (sp == std::string::npos || line.find(' ', sp + 1) != std::string::npos) {
      throw Error("merges file " + vocab_bpe_path + ":" + std::to_string(lineno) +
                  ": expected two tokens separated by one space, got '" + line + "'");
    }
    const std::string where = "merge on line " + std::to_string(lineno);
    merges.emplace_back(vocab.id_of(encoder_json_path, where, line.substr(0, sp)),
                        vocab.id_of(encoder_json_path, where, line.substr(sp + 1)));
  }
  std::vector<std::string> tokens = vocab.tokens(encoder_json_path);
  auto it = vocab.ids.find(kEndOfText);
  SpecialToken eot{kEndOfText, 0};
  if (it != vocab.ids.end()) {
    eot.id = it->second;
  } else {
    eot.id = static_cast<uint32_t>(tokens.size());
    tokens.push_back(kEndOfText);
  }
  return build(encoder_json_path, std::move(tokens), std::move(merges), {eot}, BpeOptions{});
}

BpeTokenizer BpeTokenizer::load_hf(const std::string& path) {
  const json j = read_json(path);
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object()) {
    throw Error("tokenizer file " + path + " has no \"model\" section");
  }
  const json& model = j["model"];
  if (model.contains("type") && model["type"] != "BPE") {
    throw Error("tokenizer file " + path + ": model type " + model["type"].dump() +
                " is not supported (only BPE)");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty()) {
      throw Error("tokenizer file " + path + ": model." + key + " is not supported");
    }
  }
  if (!model.contains("vocab")) throw Error("tokenizer file " + path + " has no model.vocab");
  BpeOptions options;
  options.pattern = hf_pattern(path, j.value("pre_tokenizer", json()));
  options.ignore_merges = model.value("ignore_merges", false);
  if (j.contains("normalizer") && !j["normalizer"].is_null()) {
    log::warn("tokenizer " + path + ": normalizer is ignored (text is encoded as given)");
  }

  FileVocab vocab;
  read_vocab_object(path, model["vocab"], &vocab);
  std::vector<SpecialToken> specials;
  if (j.contains("added_tokens")) {
    for (const json& t : j["added_tokens"]) {
      if (!t.contains("id") || !t.contains("content") || !t["id"].is_number_integer() ||
          !t["content"].is_string()) {
        throw Error("tokenizer file " + path +
                    ": added_tokens entry needs id and content: " + t.dump());
      }
      const std::string content = t["content"].get<std::string>();
      const int64_t id = t["id"].get<int64_t>();
      if (static_cast<size_t>(id) >= vocab.strings.size() || !vocab.present[id]) {
        vocab.add(path, content, id);
      }
      specials.push_back({content, static_cast<uint32_t>(id)});
    }
  }

  std::vector<Merge> merges;
  const json& jm = model.value("merges", json::array());
  if (!jm.is_array()) throw Error("tokenizer file " + path + ": model.merges is not a list");
  merges.reserve(jm.size());
  for (size_t r = 0; r < jm.size(); ++r) {
    const json& e = jm[r];
    std::string a, b;
    if (e.is_string()) {
      const std::string s = e.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
        throw Error("tokenizer file " + path + ": merge #" + std::to_string(r) + " '" + s +
                    "' is not two tokens separated by one space");
      }
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      a = e[0].get<std::string>();
      b = e[1].get<std::string>();
    } else {
      throw Error("tokenizer file " + path + ": merge #" + std::to_string(r) +
                  " must be \"a b\" or [\"a\", \"b\"], got " + e.dump());
    }
    const std::string where = "merge #" + std::to_string(r);
    merges.emplace_back(vocab.id_of(path, where, a), vocab.id_of(path, where, b));
  }
  return build(path, vocab.tokens(path), std::move(merges), std::move(specials),
               std::move(options));
}

BpeTokenizer BpeTokenizer::load(const std::string& path) {
  namespace fs = std::filesystem;
  if (fs::is_directory(path)) {
    if (fs::exists(path + "/tokenizer.json")) return load_hf(path + "/tokenizer.json");
    if (fs::exists(path + "/encoder.json") && fs::exists(path + "/vocab.bpe")) {
      return load_gpt2(path + "/encoder.json", path + "/vocab.bpe");
    }
    throw Error("directory " + path + " holds neither tokenizer.json nor encoder.json + vocab.bpe");
  }
  return load_hf(path);
}

void BpeTokenizer::save_hf(const std::string& path) const {
  using ojson = nlohmann::ordered_json;
  const Model& m = *model_;
  // File string of every id: byte-level alphabet for ordinary tokens, raw text for specials.
  std::vector<std::string> strings(m.tokens.size());
  for (size_t id = 0; id < m.tokens.size(); ++id) {
    strings[id] = m.special_flag[id] ? m.tokens[id] : bytes_to_unicode(m.tokens[id]);
  }
  ojson added = ojson::array();
  for (const SpecialToken& s : m.specials) {
    added.push_back({{"id", s.id},
                     {"content", s.content},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  auto byte_level = [](bool use_regex) {
    return ojson{{"type", "ByteLevel"},
                 {"add_prefix_space", false},
                 {"trim_offsets", true},
                 {"use_regex", use_regex}};
  };
  ojson pre;
  if (m.options.pattern == kGpt2Pattern) {
    pre = byte_level(true);
  } else {
    pre = {{"type", "Sequence"},
           {"pretokenizers",
            {{{"type", "Split"},
              {"pattern", {{"Regex", m.options.pattern}}},
              {"behavior", "Isolated"},
              {"invert", false}},
             byte_level(false)}}};
  }
  ojson vocab = ojson::object();
  for (size_t id = 0; id < strings.size(); ++id) vocab[strings[id]] = id;
  ojson merges = ojson::array();
  for (const Merge& mg : m.merges) merges.push_back(strings[mg.first] + " " + strings[mg.second]);

  ojson j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = std::move(added);
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = std::move(pre);
  j["post_processor"] = nullptr;
  j["decoder"] = byte_level(true);
  j["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"ignore_merges", m.options.ignore_merges},
                {"vocab", std::move(vocab)},
                {"merges", std::move(merges)}};

  // Write-then-rename so a reader never sees a half-written tokenizer.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("cannot write tokenizer file " + tmp);
    out << j.dump(1) << '\n';
    if (!out.flush()) throw Error("error writing tokenizer file " + tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw Error("cannot rename " + tmp + " to " + path + ": " + ec.message());
}

}  // namespace lmtrain::data
