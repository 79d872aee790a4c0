// GPT-2's encoder.json + vocab.bpe loading. The input is both files, split at the first NUL
// byte (encoder.json, NUL, vocab.bpe); the corpus seeds are the fixture files joined that way.
#include <algorithm>
#include <cstring>

#include "data/bpe_tokenizer.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto* nul = static_cast<const uint8_t*>(std::memchr(data, 0, size));
  const size_t split = nul ? static_cast<size_t>(nul - data) : size;
  const std::string encoder = lmtrain::fuzz::write_input(data, split, ".encoder.json");
  const std::string vocab = lmtrain::fuzz::write_input(
      data + std::min(size, split + 1), size - std::min(size, split + 1), ".vocab.bpe");
  lmtrain::fuzz::expect_only_lmtrain_errors([&] {
    const auto tok = lmtrain::data::BpeTokenizer::load_gpt2(encoder, vocab);
    const std::string text = "The quick brown fox \xe2\x82\xac\n\t\xfe";
    if (tok.decode(tok.encode(text)) != text) __builtin_trap();
  });
  return 0;
}
