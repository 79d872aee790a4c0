// Conversations as Hugging Face chat datasets hold them (SmolTalk and the like): one JSON object
// per JSONL line with `messages: [{"role": ..., "content": ...}, ...]`.
//
// Roles are "system", "user" and "assistant". A content is a string, or (assistant only, as
// nanochat writes tool use) a list of parts {"type": "text" | "python" | "python_output",
// "text": "..."}. An assistant message may carry Qwen3's "reasoning_content" (a string). Any
// other shape is refused with the file and line, never skipped: a conversation read wrongly would
// train the model on the wrong turns.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace lmtrain::data::chat {

enum class Role { kSystem, kUser, kAssistant };
const char* role_name(Role role);

// A part of an assistant's content (nanochat's tool use).
enum class PartKind { kText, kPython, kPythonOutput };
struct ContentPart {
  PartKind kind = PartKind::kText;
  std::string text;
};

struct Message {
  Role role = Role::kUser;
  std::string content;             // a string content; the parts joined for a list content
  std::vector<ContentPart> parts;  // a list content's parts (empty for a string content)
  bool has_parts = false;          // the content was a list
  bool has_reasoning = false;      // "reasoning_content" was given
  std::string reasoning;           // Qwen3's reasoning_content
};

struct Conversation {
  std::vector<Message> messages;
};

// The conversation of one JSON object ({"messages": [...]}, other keys ignored). Throws Error
// (bad data, exit 1) naming `where` (FILE:LINE) and what is wrong.
Conversation conversation_from_json(const nlohmann::json& object, const std::string& where);
// One JSONL line (strict JSON: a key twice is an error).
Conversation conversation_from_jsonl(std::string_view line, const std::string& where);
// The conversation as one JSONL line (no newline); conversation_from_jsonl reads it back equal.
std::string conversation_to_jsonl(const Conversation& c);

// Calls fn(conversation, line_number) for every non-blank line of the JSONL file `path`, in
// order, or for every row of a parquet file's `messages` column (list<struct<role, content,
// ...>>, read through data/corpus/parquet_file.h; fn gets the row number from 1). Throws
// UsageError for a missing file; Error (bad data) for a bad line or row, naming FILE:LINE or
// FILE: row N, and for a line longer than max_line_bytes.
void for_each_conversation(const std::string& path, uint64_t max_line_bytes,
                           const std::function<void(Conversation&&, uint64_t)>& fn);

bool operator==(const Message& a, const Message& b);
inline bool operator==(const Conversation& a, const Conversation& b) {
  return a.messages == b.messages;
}

}  // namespace lmtrain::data::chat
