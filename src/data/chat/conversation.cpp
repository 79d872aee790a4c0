#include "data/chat/conversation.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_strict.h"
#include "data/corpus/byte_source.h"
#include "data/corpus/input_files.h"
#include "data/corpus/line_reader.h"
#include "data/corpus/parquet_file.h"

namespace lmtrain::data::chat {
namespace {

Role role_from(const nlohmann::json& m, const std::string& where) {
  const auto it = m.find("role");
  if (it == m.end() || !it->is_string()) {
    throw Error(where + ": a message has no \"role\" string");
  }
  const auto& r = it->get_ref<const std::string&>();
  if (r == "system") return Role::kSystem;
  if (r == "user") return Role::kUser;
  if (r == "assistant") return Role::kAssistant;
  throw Error(where + ": role \"" + r +
              "\" is not one lmtrain trains on (system, user, assistant)");
}

PartKind part_kind_from(const std::string& type, const std::string& where) {
  if (type == "text") return PartKind::kText;
  if (type == "python") return PartKind::kPython;
  if (type == "python_output") return PartKind::kPythonOutput;
  throw Error(where + ": content part type \"" + type +
              "\" is not one of text, python, python_output");
}

Message message_from(const nlohmann::json& m, const std::string& where) {
  if (!m.is_object()) throw Error(where + ": a message is not a JSON object");
  Message msg;
  msg.role = role_from(m, where);
  const auto c = m.find("content");
  if (c == m.end()) throw Error(where + ": a message has no \"content\"");
  if (c->is_string()) {
    msg.content = c->get<std::string>();
  } else if (c->is_array()) {
    if (msg.role != Role::kAssistant) {
      throw Error(where + ": a " + role_name(msg.role) +
                  " message's content is a list; only an assistant's may have parts");
    }
    msg.has_parts = true;
    for (const auto& p : *c) {
      const auto type = p.is_object() ? p.find("type") : p.end();
      const auto text = p.is_object() ? p.find("text") : p.end();
      if (!p.is_object() || type == p.end() || !type->is_string() || text == p.end() ||
          !text->is_string()) {
        throw Error(where + ": a content part is not {\"type\": ..., \"text\": \"...\"}");
      }
      msg.parts.push_back(
          {part_kind_from(type->get<std::string>(), where), text->get<std::string>()});
      msg.content += msg.parts.back().text;
    }
  } else {
    throw Error(where + ": a message's content is neither a string nor a list of parts");
  }
  const auto r = m.find("reasoning_content");
  if (r != m.end() && !r->is_null()) {
    if (!r->is_string() || msg.role != Role::kAssistant) {
      throw Error(where + ": \"reasoning_content\" must be a string of an assistant message");
    }
    msg.has_reasoning = true;
    msg.reasoning = r->get<std::string>();
  }
  return msg;
}

const char* part_name(PartKind k) {
  switch (k) {
    case PartKind::kText:
      return "text";
    case PartKind::kPython:
      return "python";
    case PartKind::kPythonOutput:
      return "python_output";
  }
  return "text";
}

}  // namespace

const char* role_name(Role role) {
  switch (role) {
    case Role::kSystem:
      return "system";
    case Role::kUser:
      return "user";
    case Role::kAssistant:
      return "assistant";
  }
  return "user";
}

Conversation conversation_from_json(const nlohmann::json& object, const std::string& where) {
  if (!object.is_object()) throw Error(where + ": not a JSON object");
  const auto it = object.find("messages");
  if (it == object.end() || !it->is_array()) {
    throw Error(where +
                ": no \"messages\" list (a conversation is {\"messages\": "
                "[{\"role\": ..., \"content\": ...}, ...]})");
  }
  if (it->empty()) throw Error(where + ": \"messages\" is empty");
  Conversation c;
  for (const auto& m : *it) c.messages.push_back(message_from(m, where));
  return c;
}

Conversation conversation_from_jsonl(std::string_view line, const std::string& where) {
  return conversation_from_json(core::parse_json_strict(line, where), where);
}

std::string conversation_to_jsonl(const Conversation& c) {
  nlohmann::json messages = nlohmann::json::array();
  for (const auto& m : c.messages) {
    nlohmann::json j = {{"role", role_name(m.role)}};
    if (m.has_parts) {
      nlohmann::json parts = nlohmann::json::array();
      for (const auto& p : m.parts)
        parts.push_back({{"type", part_name(p.kind)}, {"text", p.text}});
      j["content"] = parts;
    } else {
      j["content"] = m.content;
    }
    if (m.has_reasoning) j["reasoning_content"] = m.reasoning;
    messages.push_back(std::move(j));
  }
  // Invalid UTF-8 cannot come from a parsed file; replace rather than throw for made-up ones.
  return nlohmann::json{{"messages", messages}}.dump(-1, ' ', false,
                                                     nlohmann::json::error_handler_t::replace);
}

void for_each_conversation(const std::string& path, uint64_t max_line_bytes,
                           const std::function<void(Conversation&&, uint64_t)>& fn) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw UsageError("conversations: " + path + " is not a file");
  }
  const InputFile file = classify_input(path);
  if (file.format == InputFormat::kParquet) {
    // The `messages` column (list<struct<role, content, ...>>), each row read as the JSON
    // object a JSONL line would hold; rows are numbered from 1 as lines are.
    for_each_parquet_json_row(path, "messages", [&](int64_t row, const std::string& json) {
      const std::string where = path + ": row " + std::to_string(row + 1);
      nlohmann::json object = {{"messages", nlohmann::json::parse(json)}};
      fn(conversation_from_json(object, where), static_cast<uint64_t>(row + 1));
    });
    return;
  }
  auto source = open_byte_source(path, file.compression);
  LineReader lines(*source, static_cast<size_t>(max_line_bytes));
  std::string_view line;
  bool complete = true;
  while (lines.next(&line, &complete)) {
    const std::string where = path + ":" + std::to_string(lines.line_number());
    if (!complete) {
      throw Error(where + ": a line longer than " + std::to_string(max_line_bytes) +
                  " bytes (one conversation per line)");
    }
    if (line.find_first_not_of(" \t\r\n") == std::string_view::npos) continue;
    fn(conversation_from_jsonl(line, where), lines.line_number());
  }
}

bool operator==(const Message& a, const Message& b) {
  if (a.role != b.role || a.content != b.content || a.has_parts != b.has_parts ||
      a.has_reasoning != b.has_reasoning || a.reasoning != b.reasoning ||
      a.parts.size() != b.parts.size()) {
    return false;
  }
  for (size_t i = 0; i < a.parts.size(); ++i) {
    if (a.parts[i].kind != b.parts[i].kind || a.parts[i].text != b.parts[i].text) return false;
  }
  return true;
}

}  // namespace lmtrain::data::chat
