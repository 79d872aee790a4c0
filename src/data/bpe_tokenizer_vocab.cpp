// BpeTokenizer's read-only accessors: the vocabulary, merges and special tokens (end of text
// included), and decode (ids back to their bytes).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "data/bpe_tokenizer.h"
#include "data/bpe_tokenizer_model.h"

namespace lmtrain::data {

const char* const kEndOfText = "<|endoftext|>";

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

}  // namespace lmtrain::data
