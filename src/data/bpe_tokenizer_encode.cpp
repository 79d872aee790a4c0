// BpeTokenizer's encoding: the text normalized and prefixed as the options say, split into
// pre-tokens, special-token text found (encode_with_special), and each pre-token looked up in
// the shared memo (bpe_tokenizer_cache.h) before bpe() (bpe_tokenizer_merge.cpp) merges it.
#include <string>
#include <string_view>
#include <vector>

#include "data/bpe_tokenizer.h"
#include "data/bpe_tokenizer_cache.h"
#include "data/bpe_tokenizer_model.h"

namespace lmtrain::data {

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

}  // namespace lmtrain::data
