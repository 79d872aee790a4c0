// The BpeTokenizer constructor: checks the vocabulary, special tokens and merges, builds the
// merge ranks and the byte -> id table, finds the end-of-text token and digests the model.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/log.h"
#include "data/bpe_tokenizer.h"
#include "data/bpe_tokenizer_cache.h"
#include "data/bpe_tokenizer_model.h"
#include "data/byte_level.h"

namespace lmtrain::data {

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

  m->hash = bpe_detail::tokenizer_hash(m->options, m->tokens, m->merges, m->specials);
  model_ = std::move(m);
  cache_ = std::make_shared<Cache>();
}

}  // namespace lmtrain::data
