// Conversations in JSONL (data/chat/conversation.h): any file either reads into conversations or
// fails with an lmtrain::Error; a conversation read is written back and read again to the same
// conversation, and renders in every chat format (data/chat/chat_render.h) with a byte-level
// tokenizer without a crash, its mask as long as its ids.
#include <cstdio>
#include <string>

#include "data/chat/chat_render.h"
#include "data/chat/conversation.h"
#include "fuzz_util.h"

namespace {

// 256 bytes and the special tokens of every format.
const lmtrain::data::BpeTokenizer& byte_tokenizer() {
  static const lmtrain::data::BpeTokenizer tok = [] {
    namespace c = lmtrain::data::chat;
    std::vector<std::string> tokens;
    for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
    std::vector<lmtrain::data::SpecialToken> specials;
    std::vector<std::string> names = {"<|endoftext|>"};
    for (auto k :
         {c::ChatFormatKind::kNanochat, c::ChatFormatKind::kChatml, c::ChatFormatKind::kLlama3}) {
      for (const auto& n : c::chat_format_special_tokens(k)) names.push_back(n);
    }
    for (const auto& n : names) {
      specials.push_back({n, static_cast<uint32_t>(tokens.size())});
      tokens.push_back(n);
    }
    return lmtrain::data::BpeTokenizer(tokens, {}, specials);
  }();
  return tok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace c = lmtrain::data::chat;
  const std::string path = lmtrain::fuzz::write_input(data, size, ".jsonl");
  lmtrain::fuzz::expect_only_lmtrain_errors([&] {
    c::for_each_conversation(path, 1 << 20, [](c::Conversation&& conv, uint64_t) {
      const std::string line = c::conversation_to_jsonl(conv);
      if (!(c::conversation_from_jsonl(line, "round trip") == conv)) {
        std::fprintf(stderr, "FINDING: the conversation differs after a write and read: %s\n",
                     line.substr(0, 300).c_str());
        __builtin_trap();
      }
      for (const char* name : {"nanochat", "chatml", "qwen2.5", "qwen3", "llama3"}) {
        lmtrain::fuzz::expect_only_lmtrain_errors([&] {
          const c::ChatRenderer r(*c::chat_format_from_name(name), byte_tokenizer(), "bytes");
          const auto out = r.render(conv, "fuzz");
          if (out.ids.size() != out.mask.size()) __builtin_trap();
        });
      }
    });
  });
  return 0;
}
