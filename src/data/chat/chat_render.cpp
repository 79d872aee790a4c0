#include "data/chat/chat_render.h"

#include <algorithm>

#include "core/error.h"

namespace lmtrain::data::chat {
namespace {

bool is_python_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// The code point starting at s[i] and its length in bytes (invalid UTF-8: the byte, length 1;
// never whitespace then, as Python never sees it: our contents come from parsed JSON).
std::pair<uint32_t, size_t> code_point_at(const std::string& s, size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 1;
  if (i + n > s.size()) n = 1;
  uint32_t cp = n == 1 ? b : b & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return {n == 1 && b >= 0x80 ? 0xFFFFFFFFu : cp, n};
}

// Python's s.strip('\n') / lstrip('\n') / rstrip('\n').
std::string strip_newlines(const std::string& s, bool left, bool right) {
  size_t b = 0, e = s.size();
  if (left) {
    while (b < e && s[b] == '\n') ++b;
  }
  if (right) {
    while (e > b && s[e - 1] == '\n') --e;
  }
  return s.substr(b, e - b);
}

// Python's s.split(sep)[0] and s.split(sep)[-1].
std::string before_first(const std::string& s, const std::string& sep) {
  const size_t at = s.find(sep);
  return at == std::string::npos ? s : s.substr(0, at);
}
std::string after_last(const std::string& s, const std::string& sep) {
  const size_t at = s.rfind(sep);
  return at == std::string::npos ? s : s.substr(at + sep.size());
}

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }
bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

// Builds a rendered text and its target spans.
struct TextBuilder {
  RenderedText r;
  size_t open = 0;
  void add(const std::string& s) { r.text += s; }
  void begin_target() { open = r.text.size(); }
  void end_target() { r.target_spans.emplace_back(open, r.text.size()); }
};

}  // namespace

int64_t RenderedChat::targets() const { return std::count(mask.begin(), mask.end(), uint8_t{1}); }

BpeTokenizer with_special_tokens(const BpeTokenizer& tok, const std::vector<std::string>& names) {
  std::vector<std::string> tokens;
  for (uint32_t id = 0; id < tok.vocab_size(); ++id) tokens.push_back(tok.token_bytes(id));
  std::vector<SpecialToken> specials = tok.special_tokens();
  for (const auto& n : names) {
    if (tok.special_id(n)) continue;
    specials.push_back({n, static_cast<uint32_t>(tokens.size())});
    tokens.push_back(n);
  }
  return BpeTokenizer(std::move(tokens), tok.merges(), std::move(specials), tok.options());
}

std::string python_strip(const std::string& s) {
  size_t b = 0;
  while (b < s.size()) {
    const auto [cp, n] = code_point_at(s, b);
    if (!is_python_space(cp)) break;
    b += n;
  }
  // From the end: find the last code point that is not whitespace by walking forward.
  size_t e = b, i = b;
  while (i < s.size()) {
    const auto [cp, n] = code_point_at(s, i);
    i += n;
    if (!is_python_space(cp)) e = i;
  }
  return s.substr(b, e - b);
}

ChatRenderer::ChatRenderer(ChatFormat format, const BpeTokenizer& tokenizer,
                           const std::string& tokenizer_name)
    : format_(std::move(format)), tokenizer_(&tokenizer) {
  std::string missing;
  for (const auto& t : chat_format_special_tokens(format_.kind)) {
    const auto id = tokenizer.special_id(t);
    if (!id) {
      missing += (missing.empty() ? "" : ", ") + t;
    } else {
      special_ids_.push_back(*id);
    }
  }
  if (!missing.empty()) {
    throw UsageError(tokenizer_name + " lacks the special tokens of chat format " +
                     chat_format_name(format_.kind) + ": " + missing +
                     (format_.kind == ChatFormatKind::kNanochat
                          ? " (a tokenizer trained by `lmtrain prepare --chat_tokens` has them)"
                          : " (is it the model's own tokenizer?)"));
  }
}

RenderedText ChatRenderer::render_text(const Conversation& c, const std::string& where) const {
  TextBuilder t;
  const auto& msgs = c.messages;
  const auto* norm = tokenizer_->options().normalizer.get();
  // Contents pass through the tokenizer's normalizer first, so the byte offsets of the spans
  // survive encode()'s own (idempotent) normalisation.
  auto content_of = [&](const Message& m) {
    if (m.has_parts) {
      throw UsageError(where +
                       ": an assistant content with parts (nanochat's tool use) has no "
                       "rendering in chat format " +
                       std::string(chat_format_name(format_.kind)));
    }
    return norm ? norm->apply(m.content) : m.content;
  };
  auto header = [&](const Message& m) {
    t.add("<|im_start|>");
    t.add(role_name(m.role));
    t.add("\n");
  };
  switch (format_.kind) {
    case ChatFormatKind::kNanochat:
      throw Error("nanochat's format is rendered as tokens, not text");
    case ChatFormatKind::kChatml: {
      if (!format_.default_system.empty() && msgs.front().role != Role::kSystem) {
        t.add("<|im_start|>system\n" + format_.default_system + "<|im_end|>\n");
      }
      for (const auto& m : msgs) {
        header(m);
        const std::string content = content_of(m);
        if (m.role == Role::kAssistant) t.begin_target();
        t.add(content + "<|im_end|>");
        if (m.role == Role::kAssistant) t.end_target();
        t.add("\n");
      }
      break;
    }
    case ChatFormatKind::kQwen3: {
      // The last user message that is not a tool response: assistant turns after it keep their
      // thinking.
      int64_t last_query = static_cast<int64_t>(msgs.size()) - 1;
      for (int64_t i = last_query; i >= 0; --i) {
        const auto& m = msgs[static_cast<size_t>(i)];
        if (m.role == Role::kUser && !(starts_with(m.content, "<tool_response>") &&
                                       ends_with(m.content, "</tool_response>"))) {
          last_query = i;
          break;
        }
      }
      for (size_t i = 0; i < msgs.size(); ++i) {
        const auto& m = msgs[i];
        std::string content = content_of(m);
        if (m.role != Role::kAssistant) {
          header(m);
          t.add(content + "<|im_end|>\n");
          continue;
        }
        std::string reasoning;
        if (m.has_reasoning) {
          reasoning = norm ? norm->apply(m.reasoning) : m.reasoning;
        } else if (content.find("</think>") != std::string::npos) {
          reasoning = strip_newlines(
              after_last(strip_newlines(before_first(content, "</think>"), false, true), "<think>"),
              true, false);
          content = strip_newlines(after_last(content, "</think>"), true, false);
        }
        header(m);
        t.begin_target();
        const bool last = i + 1 == msgs.size();
        if (static_cast<int64_t>(i) > last_query && (last || !reasoning.empty())) {
          t.add("<think>\n" + strip_newlines(reasoning, true, true) + "\n</think>\n\n" +
                strip_newlines(content, true, false));
        } else {
          t.add(content);
        }
        t.add("<|im_end|>");
        t.end_target();
        t.add("\n");
      }
      break;
    }
    case ChatFormatKind::kLlama3: {
      for (size_t i = 0; i < msgs.size(); ++i) {
        const auto& m = msgs[i];
        if (i == 0) t.add("<|begin_of_text|>");
        t.add("<|start_header_id|>");
        t.add(role_name(m.role));
        t.add("<|end_header_id|>\n\n");
        if (m.role == Role::kAssistant) t.begin_target();
        t.add(python_strip(content_of(m)) + "<|eot_id|>");
        if (m.role == Role::kAssistant) t.end_target();
      }
      break;
    }
  }
  return std::move(t.r);
}

RenderedChat ChatRenderer::encode_text(const RenderedText& r, const std::string& where) const {
  RenderedChat out;
  out.ids = tokenizer_->encode_with_special(r.text);
  out.mask.assign(out.ids.size(), 0);
  size_t at = 0, span = 0;
  for (size_t i = 0; i < out.ids.size(); ++i) {
    const size_t begin = at;
    at += tokenizer_->token_bytes(out.ids[i]).size();
    while (span < r.target_spans.size() && r.target_spans[span].second <= begin) ++span;
    // Token [begin, at) overlaps span [b, e) when begin < e and b < at.
    if (span < r.target_spans.size() && r.target_spans[span].first < at) out.mask[i] = 1;
  }
  if (at != r.text.size()) {
    throw Error(where + ": the tokenizer's ids do not spell the rendered text back (" +
                std::to_string(at) + " bytes for " + std::to_string(r.text.size()) +
                "): its normalizer or prefix space moves the assistant's tokens, so the loss "
                "mask cannot be placed");
  }
  return out;
}

RenderedChat ChatRenderer::render_nanochat(const Conversation& c, const std::string& where) const {
  // special_ids_ in nanochat_special_tokens() order.
  const uint32_t bos = special_ids_[0], user_start = special_ids_[1], user_end = special_ids_[2],
                 assistant_start = special_ids_[3], assistant_end = special_ids_[4],
                 python_start = special_ids_[5], python_end = special_ids_[6],
                 output_start = special_ids_[7], output_end = special_ids_[8];
  RenderedChat out;
  auto add = [&](uint32_t id, uint8_t m) {
    out.ids.push_back(id);
    out.mask.push_back(m);
  };
  auto add_text = [&](const std::string& text, uint8_t m) {
    for (uint32_t id : tokenizer_->encode(text)) add(id, m);
  };
  std::vector<const Message*> msgs;
  std::string merged_user;  // a leading system message joins the first user message
  size_t first = 0;
  if (c.messages.front().role == Role::kSystem) {
    if (c.messages.size() < 2 || c.messages[1].role != Role::kUser) {
      throw UsageError(where + ": nanochat's format needs a user message after the system one");
    }
    merged_user = c.messages[0].content + "\n\n" + c.messages[1].content;
    first = 1;
  }
  add(bos, 0);
  for (size_t i = first; i < c.messages.size(); ++i) {
    const Message& m = c.messages[i];
    const Role expected = (i - first) % 2 == 0 ? Role::kUser : Role::kAssistant;
    if (m.role != expected) {
      throw UsageError(where + ": message " + std::to_string(i) + " is from " + role_name(m.role) +
                       " but nanochat's format alternates user and assistant (a system message "
                       "only first)");
    }
    if (m.role == Role::kUser) {
      add(user_start, 0);
      add_text(i == first && first == 1 ? merged_user : m.content, 0);
      add(user_end, 0);
      continue;
    }
    add(assistant_start, 0);
    if (!m.has_parts) {
      add_text(m.content, 1);
    } else {
      for (const auto& p : m.parts) {
        switch (p.kind) {
          case PartKind::kText:
            add_text(p.text, 1);
            break;
          case PartKind::kPython:
            add(python_start, 1);
            add_text(p.text, 1);
            add(python_end, 1);
            break;
          case PartKind::kPythonOutput:  // comes from the tool at test time: not a target
            add(output_start, 0);
            add_text(p.text, 0);
            add(output_end, 0);
            break;
        }
      }
    }
    add(assistant_end, 1);
  }
  return out;
}

std::vector<uint32_t> ChatRenderer::render_prompt(const Conversation& c,
                                                  const std::string& where) const {
  if (c.messages.empty()) throw UsageError(where + ": a conversation without messages");
  if (format_.kind == ChatFormatKind::kNanochat) {
    auto ids = render_nanochat(c, where).ids;
    ids.push_back(special_ids_[3]);  // <|assistant_start|>
    return ids;
  }
  RenderedText r = render_text(c, where);
  r.text += format_.kind == ChatFormatKind::kLlama3
                ? "<|start_header_id|>assistant<|end_header_id|>\n\n"
                : "<|im_start|>assistant\n";
  return tokenizer_->encode_with_special(r.text);
}

uint32_t ChatRenderer::end_token() const {
  switch (format_.kind) {
    case ChatFormatKind::kNanochat:
      return special_ids_[4];  // <|assistant_end|>
    case ChatFormatKind::kChatml:
    case ChatFormatKind::kQwen3:
      return special_ids_[1];  // <|im_end|>
    case ChatFormatKind::kLlama3:
      return special_ids_[3];  // <|eot_id|>
  }
  return special_ids_.back();
}

RenderedChat ChatRenderer::render(const Conversation& c, const std::string& where) const {
  if (c.messages.empty()) throw UsageError(where + ": a conversation without messages");
  if (format_.kind == ChatFormatKind::kNanochat) return render_nanochat(c, where);
  return encode_text(render_text(c, where), where);
}

}  // namespace lmtrain::data::chat
