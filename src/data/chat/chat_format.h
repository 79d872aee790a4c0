// The chat formats lmtrain renders conversations in, and how a model's format is found.
//
//   nanochat  <|bos|> <|user_start|>..<|user_end|> <|assistant_start|>..<|assistant_end|>, with
//             <|python_start|>/<|python_end|> and <|output_start|>/<|output_end|> for tool
//             parts (nanochat/tokenizer.py render_conversation); the tokens `lmtrain prepare
//             --chat_tokens` adds to the tokenizer it trains
//   chatml    <|im_start|>ROLE\n CONTENT <|im_end|>\n per message (Qwen2 and Qwen2.5, SmolLM2),
//             with the default system prompt the model's template inserts when the conversation
//             has none (Qwen2.5: "You are Qwen, created by Alibaba Cloud. ...")
//   qwen3     ChatML with Qwen3's thinking tags: the assistant turns after the last user
//             message carry <think>\nREASONING\n</think>\n\n before their content, the earlier
//             ones lose their reasoning
//   llama3    <|begin_of_text|> then <|start_header_id|>ROLE<|end_header_id|>\n\n
//             CONTENT(trimmed)<|eot_id|> per message (Llama 3 / 3.0's template)
//
// An imported model's format comes from the chat_template of its tokenizer_config.json: a
// template is recognised by the markers of one of these formats, and one that has markers of
// none, or the marks of what lmtrain does not render (Llama 3.1's date header, an unknown
// default system prompt), is refused naming the model. It is never guessed.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lmtrain::data::chat {

enum class ChatFormatKind { kNanochat, kChatml, kQwen3, kLlama3 };

struct ChatFormat {
  ChatFormatKind kind = ChatFormatKind::kNanochat;
  // chatml: the system message the template renders when the conversation has none (empty:
  // none is rendered).
  std::string default_system;
};

// "nanochat", "chatml", "qwen3", "llama3".
const char* chat_format_name(ChatFormatKind kind);
// A --chat_format value: the names above and "qwen2.5" (chatml with Qwen2.5's default system
// prompt). nullopt for anything else.
std::optional<ChatFormat> chat_format_from_name(std::string_view name);
// "chatml (default system prompt \"...\")" and the like, for logs and summaries.
std::string describe_chat_format(const ChatFormat& format);

// nanochat's special tokens, in its order (<|bos|> first).
const std::vector<std::string>& nanochat_special_tokens();
// The special tokens a format renders; every one must be a special token of the tokenizer.
std::vector<std::string> chat_format_special_tokens(ChatFormatKind kind);

// The format of a Jinja chat_template (see above). Throws UsageError naming `model`.
ChatFormat chat_format_from_template(const std::string& chat_template, const std::string& model);
// The format of an HF tokenizer_config.json's "chat_template" (a string, or the "default" of a
// list of named templates). Throws UsageError naming `model` when it has none or one lmtrain
// cannot render.
ChatFormat chat_format_from_tokenizer_config(const std::string& path, const std::string& model);

}  // namespace lmtrain::data::chat
