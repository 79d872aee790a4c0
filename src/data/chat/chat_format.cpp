#include "data/chat/chat_format.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fs.h"
#include "core/json_strict.h"

namespace lmtrain::data::chat {
namespace {

constexpr const char* kQwen25System =
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

bool has(const std::string& text, const char* part) { return text.find(part) != std::string::npos; }

// The literal default system prompt of a ChatML template: the text of a Jinja string literal
// '<|im_start|>system\n....<|im_end|>' (the rendering when messages[0] is not a system
// message). Several different ones, or one built from variables, cannot be told apart from
// the template's text alone: those templates are refused (nullopt + *ambiguous).
std::optional<std::string> chatml_default_system(const std::string& tpl, bool* ambiguous) {
  const std::string open = "<|im_start|>system\\n";
  std::optional<std::string> found;
  for (size_t at = tpl.find(open); at != std::string::npos; at = tpl.find(open, at + 1)) {
    const size_t begin = at + open.size();
    const size_t end = tpl.find("<|im_end|>", begin);
    if (end == std::string::npos) continue;
    const std::string literal = tpl.substr(begin, end - begin);
    // A system message's own content (`' + message['content'] + '`) is not a default.
    if (literal.find_first_of("'\"{}+") != std::string::npos) continue;
    std::string text;
    for (size_t i = 0; i < literal.size(); ++i) {
      if (literal[i] == '\\' && i + 1 < literal.size() && literal[i + 1] == 'n') {
        text += '\n';
        ++i;
      } else if (literal[i] == '\\') {
        *ambiguous = true;  // another escape: not worth guessing how Jinja reads it
        return std::nullopt;
      } else {
        text += literal[i];
      }
    }
    if (found && *found != text) {
      *ambiguous = true;
      return std::nullopt;
    }
    found = text;
  }
  return found;
}

}  // namespace

const char* chat_format_name(ChatFormatKind kind) {
  switch (kind) {
    case ChatFormatKind::kNanochat:
      return "nanochat";
    case ChatFormatKind::kChatml:
      return "chatml";
    case ChatFormatKind::kQwen3:
      return "qwen3";
    case ChatFormatKind::kLlama3:
      return "llama3";
  }
  return "nanochat";
}

std::optional<ChatFormat> chat_format_from_name(std::string_view name) {
  if (name == "nanochat") return ChatFormat{ChatFormatKind::kNanochat, ""};
  if (name == "chatml") return ChatFormat{ChatFormatKind::kChatml, ""};
  if (name == "qwen2.5") return ChatFormat{ChatFormatKind::kChatml, kQwen25System};
  if (name == "qwen3") return ChatFormat{ChatFormatKind::kQwen3, ""};
  if (name == "llama3") return ChatFormat{ChatFormatKind::kLlama3, ""};
  return std::nullopt;
}

std::string describe_chat_format(const ChatFormat& format) {
  std::string s = chat_format_name(format.kind);
  if (!format.default_system.empty()) {
    s += " (default system prompt " + nlohmann::json(format.default_system).dump() + ")";
  }
  return s;
}

const std::vector<std::string>& nanochat_special_tokens() {
  static const std::vector<std::string> tokens = {
      "<|bos|>",           "<|user_start|>",   "<|user_end|>",   "<|assistant_start|>",
      "<|assistant_end|>", "<|python_start|>", "<|python_end|>", "<|output_start|>",
      "<|output_end|>"};
  return tokens;
}

std::vector<std::string> chat_format_special_tokens(ChatFormatKind kind) {
  switch (kind) {
    case ChatFormatKind::kNanochat:
      return nanochat_special_tokens();
    case ChatFormatKind::kChatml:
    case ChatFormatKind::kQwen3:
      return {"<|im_start|>", "<|im_end|>"};
    case ChatFormatKind::kLlama3:
      return {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"};
  }
  return {};
}

ChatFormat chat_format_from_template(const std::string& tpl, const std::string& model) {
  const std::string refuse = model + ": its chat template ";
  if (has(tpl, "<|start_header_id|>") && has(tpl, "<|end_header_id|>") && has(tpl, "<|eot_id|>")) {
    if (has(tpl, "Cutting Knowledge Date") || has(tpl, "Today Date") || has(tpl, "tools")) {
      throw UsageError(refuse +
                       "is Llama 3.1 / 3.2's (a date header in the system turn, tools): lmtrain "
                       "renders Llama 3's (3.0) only; give --chat_format llama3 to train in that "
                       "format on purpose");
    }
    if (!has(tpl, "trim")) {
      throw UsageError(refuse +
                       "has Llama 3's headers but does not trim contents as Llama 3's "
                       "does: lmtrain does not know how it renders");
    }
    return {ChatFormatKind::kLlama3, ""};
  }
  if (has(tpl, "<|im_start|>") && has(tpl, "<|im_end|>")) {
    if (has(tpl, "<think>")) {
      if (!has(tpl, "reasoning_content") || !has(tpl, "last_query_index")) {
        throw UsageError(refuse +
                         "has thinking tags but not Qwen3's handling of them "
                         "(reasoning_content, last_query_index)");
      }
      return {ChatFormatKind::kQwen3, ""};
    }
    bool ambiguous = false;
    const auto system = chatml_default_system(tpl, &ambiguous);
    if (ambiguous) {
      throw UsageError(refuse + "has a default system prompt lmtrain cannot read from it");
    }
    return {ChatFormatKind::kChatml, system.value_or("")};
  }
  if (has(tpl, "<|user_start|>") && has(tpl, "<|assistant_start|>")) {
    return {ChatFormatKind::kNanochat, ""};
  }
  throw UsageError(refuse +
                   "is none lmtrain renders (ChatML as Qwen2.5 / Qwen3, Llama 3's headers, "
                   "nanochat's tokens): it is never guessed; give --chat_format to choose one");
}

ChatFormat chat_format_from_tokenizer_config(const std::string& path, const std::string& model) {
  const auto config = core::parse_json_strict(core::read_file(path), path);
  const auto it = config.is_object() ? config.find("chat_template") : config.end();
  if (it == config.end() || it->is_null()) {
    throw UsageError(model + ": " + path +
                     " has no chat_template: the model is not a chat model; give --chat_format "
                     "to train it in one");
  }
  if (it->is_string()) return chat_format_from_template(it->get<std::string>(), model);
  if (it->is_array()) {  // [{"name": "default", "template": "..."}, {"name": "tool_use", ...}]
    for (const auto& t : *it) {
      if (t.is_object() && t.value("name", "") == "default" && t.contains("template") &&
          t["template"].is_string()) {
        return chat_format_from_template(t["template"].get<std::string>(), model);
      }
    }
  }
  throw UsageError(model + ": " + path +
                   "'s chat_template is neither a string nor a list with a "
                   "\"default\" template");
}

}  // namespace lmtrain::data::chat
