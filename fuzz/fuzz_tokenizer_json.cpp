// Hugging Face tokenizer.json loading, then the loaded tokenizer's contract: decode(encode(x))
// is x on a fixed text (x normalised by the tokenizer's normalizer, when it has one; with
// add_prefix_space the decoded text may hold added spaces, so only encoding is checked), and
// special-token encoding.
#include "data/bpe_tokenizer.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = lmtrain::fuzz::write_input(data, size, ".json");
  lmtrain::fuzz::expect_only_lmtrain_errors([&] {
    const auto tok = lmtrain::data::BpeTokenizer::load_hf(path);
    const std::string text = "Hello, world! \xc3\xa9t\xc3\xa9 <|endoftext|> 123\n\xff\x00z";
    const auto& o = tok.options();
    const std::string expected = o.normalizer ? o.normalizer->apply(text) : text;
    if (!o.add_prefix_space && tok.decode(tok.encode(text)) != expected) __builtin_trap();
    tok.decode(tok.encode_with_special(text));
    tok.hash();
  });
  return 0;
}
