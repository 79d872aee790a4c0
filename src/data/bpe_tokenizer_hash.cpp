// BpeTokenizer::hash(): the FNV-1a digest of a tokenizer's model, independent of the file format
// it was loaded from (shards and checkpoints record it to tie themselves to a tokenizer).
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "data/bpe_pair.h"
#include "data/bpe_tokenizer_model.h"

namespace lmtrain::data {
namespace {

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

namespace bpe_detail {

std::string tokenizer_hash(const BpeOptions& options, const std::vector<std::string>& tokens,
                           const std::vector<BpeTokenizer::Merge>& merges,
                           const std::vector<SpecialToken>& specials) {
  Fnv1a h;
  h.str("lmtrain-bpe-v1");
  h.str(options.pattern);
  h.u64(options.ignore_merges);
  // Each option only when set, so older tokenizers keep their hashes.
  if (options.add_prefix_space) h.str("add_prefix_space");
  if (options.add_prefix_space && options.split_pretokenizer) h.str("prefix_per_piece");
  if (options.normalizer) h.str("normalizer " + options.normalizer->spec());
  h.u64(tokens.size());
  for (const std::string& t : tokens) h.str(t);
  h.u64(merges.size());
  for (const BpeTokenizer::Merge& mg : merges) h.u64(bpe_pair_key(mg.first, mg.second));
  h.u64(specials.size());
  for (const SpecialToken& s : specials) {
    h.u64(s.id);
    h.str(s.content);
  }
  return h.hex();
}

}  // namespace bpe_detail
}  // namespace lmtrain::data
