// A conversation as token ids and its loss mask, in one chat format (chat_format.h).
//
// The mask is 1 exactly on the assistant's tokens and its end token (<|im_end|>, <|eot_id|>,
// <|assistant_end|>): what SFT trains on. For the Hugging Face formats the conversation is
// rendered to text as the model's Jinja template does, and that text is encoded with special
// tokens recognised, as transformers' apply_chat_template(tokenize=True) does, so the ids are
// the same token for token; a token is in the mask when any of its bytes is in an assistant
// span (what apply_chat_template's return_assistant_tokens_mask gives for a template whose
// {% generation %} block holds the assistant's content and end token). nanochat's format is
// built token by token as nanochat's render_conversation does, contents encoded as ordinary
// text; tool outputs (python_output) are not targets.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/bpe_tokenizer.h"
#include "data/chat/chat_format.h"
#include "data/chat/conversation.h"

namespace lmtrain::data::chat {

struct RenderedChat {
  std::vector<uint32_t> ids;
  std::vector<uint8_t> mask;  // per id: 1 = a target (the assistant's), 0 = context
  int64_t targets() const;
};

// A conversation's text in an HF format with the byte spans of the assistant's parts (each
// ends after its end token's text). For tests and `--dry_run` displays.
struct RenderedText {
  std::string text;
  std::vector<std::pair<size_t, size_t>> target_spans;  // [begin, end) byte offsets
};

class ChatRenderer {
 public:
  // Checks that every special token of `format` is a special token of `tokenizer`; throws
  // UsageError naming the missing ones and `tokenizer_name`.
  ChatRenderer(ChatFormat format, const BpeTokenizer& tokenizer, const std::string& tokenizer_name);

  // Throws UsageError naming `where` for a conversation the format cannot hold (nanochat: the
  // turns must alternate user, assistant, ...; a system message only first).
  RenderedChat render(const Conversation& c, const std::string& where) const;
  // A prompt for the assistant's next turn: the conversation (its last message from the user)
  // then the assistant's header (<|assistant_start|>; "<|im_start|>assistant\n";
  // "<|start_header_id|>assistant<|end_header_id|>\n\n"), as add_generation_prompt renders it.
  std::vector<uint32_t> render_prompt(const Conversation& c, const std::string& where) const;
  // The token that ends an assistant's turn (<|assistant_end|>, <|im_end|>, <|eot_id|>).
  uint32_t end_token() const;
  // The HF formats' text (not nanochat, which is not rendered through text).
  RenderedText render_text(const Conversation& c, const std::string& where) const;

  const ChatFormat& format() const { return format_; }

 private:
  RenderedChat render_nanochat(const Conversation& c, const std::string& where) const;
  RenderedChat encode_text(const RenderedText& r, const std::string& where) const;

  ChatFormat format_;
  const BpeTokenizer* tokenizer_;
  std::vector<uint32_t> special_ids_;  // chat_format_special_tokens(kind), in order
};

// `tok` with `names` added as special tokens after its last id (those it has already are kept
// where they are): nanochat's tokens on the tokenizer `lmtrain prepare --chat_tokens` trains.
BpeTokenizer with_special_tokens(const BpeTokenizer& tok, const std::vector<std::string>& names);

// Python's str.strip() (Jinja's trim filter) on UTF-8: removes leading and trailing Unicode
// whitespace as Python defines it.
std::string python_strip(const std::string& s);

}  // namespace lmtrain::data::chat
