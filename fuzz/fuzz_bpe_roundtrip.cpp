// BPE encode/decode of arbitrary bytes with the fixture tokenizer: decode(encode(x)) == x for
// every x, special tokens included; decoding arbitrary ids fails only with lmtrain::Error.
#include <cstring>
#include <vector>

#include "data/bpe_tokenizer.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto tok = lmtrain::data::BpeTokenizer::load_hf(
      std::string(LMTRAIN_SOURCE_DIR) + "/tests/fixtures/tokenizer/tokenizer.json");
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (tok.decode(tok.encode(text)) != text) __builtin_trap();
  if (tok.decode(tok.encode_with_special(text)) != text) __builtin_trap();
  std::vector<uint32_t> ids(size / 4);
  if (!ids.empty()) std::memcpy(ids.data(), data, ids.size() * 4);
  for (auto& id : ids) id %= static_cast<uint32_t>(tok.vocab_size() + 8);  // some out of range
  lmtrain::fuzz::expect_only_lmtrain_errors([&] { tok.decode(ids); });
  return 0;
}
