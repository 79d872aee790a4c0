#include "serve/chat_request.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_strict.h"

namespace lmtrain::serve {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& param, const std::string& message) {
  throw RequestError(400, message, param);
}

double number_in(const json& v, const std::string& key, double lo, double hi, bool open_lo) {
  if (!v.is_number()) bad(key, "'" + key + "' must be a number");
  const double x = v.get<double>();
  if (!std::isfinite(x) || x > hi || x < lo || (open_lo && x == lo)) {
    bad(key, "'" + key + "' must be in " + (open_lo ? "(" : "[") + json(lo).dump() + ", " +
                 json(hi).dump() + "], got " + v.dump());
  }
  return x;
}

int64_t integer_in(const json& v, const std::string& key, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) bad(key, "'" + key + "' must be an integer");
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    bad(key, "'" + key + "' is too large");
  }
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) {
    bad(key, "'" + key + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                 "], got " + std::to_string(x));
  }
  return x;
}

// A message's content: a string, or a list of {"type": "text", "text": ...} parts joined.
std::string content_of(const json& c, const std::string& at, size_t max_bytes) {
  std::string text;
  if (c.is_string()) {
    text = c.get<std::string>();
  } else if (c.is_array()) {
    for (size_t i = 0; i < c.size(); ++i) {
      const auto& part = c[i];
      const std::string p = at + "[" + std::to_string(i) + "]";
      if (!part.is_object() || !part.contains("type") || part["type"] != "text") {
        bad(p,
            "'" + p + "' must be a {\"type\": \"text\", \"text\": ...} part (only text is served)");
      }
      if (!part.contains("text") || !part["text"].is_string())
        bad(p, "'" + p + ".text' must be a string");
      text += part["text"].get<std::string>();
    }
  } else {
    bad(at, "'" + at + "' must be a string or a list of text parts");
  }
  if (text.size() > max_bytes) {
    bad(at, "'" + at + "' holds " + std::to_string(text.size()) + " bytes, more than the " +
                std::to_string(max_bytes) + " a message may hold");
  }
  return text;
}

std::vector<ChatTurn> messages_of(const json& m, const RequestLimits& limits) {
  if (!m.is_array()) bad("messages", "'messages' must be a list of {role, content} objects");
  if (m.empty()) bad("messages", "'messages' is empty: give at least one message");
  if (m.size() > limits.max_messages) {
    bad("messages", "'messages' holds " + std::to_string(m.size()) + " messages, more than " +
                        std::to_string(limits.max_messages));
  }
  std::vector<ChatTurn> out;
  for (size_t i = 0; i < m.size(); ++i) {
    const std::string at = "messages[" + std::to_string(i) + "]";
    const auto& msg = m[i];
    if (!msg.is_object()) bad(at, "'" + at + "' must be an object with role and content");
    ChatTurn turn;
    for (const auto& [key, v] : msg.items()) {
      if (key == "role") {
        if (!v.is_string()) bad(at + ".role", "'" + at + ".role' must be a string");
        turn.role = v.get<std::string>();
        if (turn.role == "developer") turn.role = "system";
        if (turn.role != "system" && turn.role != "user" && turn.role != "assistant") {
          bad(at + ".role", "'" + at + ".role' is '" + v.get<std::string>() +
                                "': this server takes system, developer, user and assistant");
        }
      } else if (key == "content") {
        turn.content = content_of(v, at + ".content", limits.max_content_bytes);
      } else if (key != "name") {
        bad(at + "." + key, "'" + at + "." + key + "' is not supported (tools are not served)");
      }
    }
    if (turn.role.empty()) bad(at + ".role", "'" + at + ".role' is missing");
    if (!msg.contains("content")) bad(at + ".content", "'" + at + ".content' is missing");
    out.push_back(std::move(turn));
  }
  return out;
}

// logit_bias: {"<token id>": bias}, as OpenAI takes it (ids as strings, being JSON keys).
std::vector<std::pair<int64_t, float>> logit_bias_of(const json& v, const RequestLimits& limits) {
  const std::string key = "logit_bias";
  if (!v.is_object()) bad(key, "'logit_bias' must be an object of {\"token id\": bias}");
  if (v.size() > limits.max_logit_bias) {
    bad(key, "'logit_bias' holds " + std::to_string(v.size()) + " entries, more than " +
                 std::to_string(limits.max_logit_bias));
  }
  std::vector<std::pair<int64_t, float>> out;
  for (const auto& [id_text, bias] : v.items()) {
    const std::string at = key + "." + id_text;
    int64_t id = -1;
    const bool digits = !id_text.empty() && id_text.size() <= 12 &&
                        id_text.find_first_not_of("0123456789") == std::string::npos;
    if (digits) id = std::stoll(id_text);
    if (!digits || (limits.vocab_size > 0 && id >= limits.vocab_size)) {
      bad(at, "'" + at + "': '" + id_text + "' is not a token id" +
                  (limits.vocab_size > 0 ? " (0 to " + std::to_string(limits.vocab_size - 1) + ")"
                                         : std::string()));
    }
    out.emplace_back(id, static_cast<float>(number_in(bias, at, -100, 100, false)));
  }
  std::sort(out.begin(), out.end());
  for (size_t i = 1; i < out.size(); ++i) {
    if (out[i].first == out[i - 1].first) {
      bad(key, "'logit_bias' gives token " + std::to_string(out[i].first) + " twice");
    }
  }
  return out;
}

}  // namespace

ChatRequest parse_chat_request(std::string_view body, const RequestLimits& limits) {
  json j;
  try {
    j = core::parse_json_strict(body, "the request body");
  } catch (const Error& e) {
    bad("", e.what());
  }
  if (!j.is_object()) bad("", "the request body must be a JSON object");
  ChatRequest r;
  bool has_messages = false;
  for (const auto& [key, v] : j.items()) {
    if (key == "model") {
      if (!v.is_string()) bad(key, "'model' must be a string");
      r.model = v.get<std::string>();
    } else if (key == "messages") {
      r.messages = messages_of(v, limits);
      has_messages = true;
    } else if (key == "stream") {
      if (!v.is_boolean() && !v.is_null()) bad(key, "'stream' must be true or false");
      r.stream = v.is_boolean() && v.get<bool>();
    } else if (key == "stream_options") {
      if (v.is_null()) continue;
      if (!v.is_object()) bad(key, "'stream_options' must be an object");
      for (const auto& [k2, v2] : v.items()) {
        if (k2 != "include_usage" || !v2.is_boolean()) {
          bad(key + "." + k2, "'stream_options." + k2 + "' is not supported (include_usage is)");
        }
        r.include_usage = v2.get<bool>();
      }
    } else if (key == "max_tokens" || key == "max_completion_tokens") {
      if (v.is_null()) continue;
      if (r.max_tokens) {
        bad("max_completion_tokens", "give one of 'max_tokens' and 'max_completion_tokens'");
      }
      r.max_tokens = integer_in(v, key, 1, limits.max_tokens);
    } else if (key == "temperature") {
      if (!v.is_null()) r.temperature = number_in(v, key, 0, 2, false);
    } else if (key == "top_p") {
      if (!v.is_null()) r.top_p = number_in(v, key, 0, 1, true);
    } else if (key == "top_k") {
      if (!v.is_null()) r.top_k = integer_in(v, key, 0, 1 << 30);
    } else if (key == "seed") {
      if (!v.is_null()) r.seed = static_cast<uint64_t>(integer_in(v, key, INT64_MIN, INT64_MAX));
    } else if (key == "logit_bias") {
      if (!v.is_null()) r.logit_bias = logit_bias_of(v, limits);
    } else if (key == "n") {
      if (!v.is_null() && integer_in(v, key, 1, 1 << 30) != 1) {
        bad(key, "'n' must be 1: this server gives one choice per request");
      }
    } else if (key == "frequency_penalty" || key == "presence_penalty") {
      if (!v.is_null() && number_in(v, key, -2, 2, false) != 0) {
        bad(key, "'" + key + "' is not supported (only 0)");
      }
    } else if (key == "logprobs") {
      if (!v.is_null() && v != false) bad(key, "'logprobs' is not supported (only false)");
    } else if (key == "user" || key == "metadata" || key == "store") {
      // Bookkeeping fields that change nothing in the answer.
    } else {
      bad(key, "'" + key + "' is not supported by this server");
    }
  }
  if (!has_messages) bad("messages", "'messages' is required");
  return r;
}

}  // namespace lmtrain::serve
