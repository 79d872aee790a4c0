// Hugging Face tokenizer.json loading, then the loaded tokenizer's contract: decode(encode(x))
// == x on a fixed text, and special-token encoding.
#include "data/bpe_tokenizer.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = lmtrain::fuzz::write_input(data, size, ".json");
  lmtrain::fuzz::expect_only_lmtrain_errors([&] {
    const auto tok = lmtrain::data::BpeTokenizer::load_hf(path);
    const std::string text = "Hello, world! \xc3\xa9t\xc3\xa9 <|endoftext|> 123\n\xff\x00z";
    if (tok.decode(tok.encode(text)) != text) __builtin_trap();
    tok.decode(tok.encode_with_special(text));
    tok.hash();
  });
  return 0;
}
