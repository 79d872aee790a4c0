#include "data/byte_level.h"

namespace lmtrain::data {
namespace {

struct Tables {
  std::array<uint8_t, 256> order{};      // rank -> byte
  std::array<uint32_t, 256> to_cp{};     // byte -> code point
  std::array<std::string, 256> to_utf8;  // byte -> UTF-8 of its code point
};

// Built once; immutable afterwards (a constant table, not mutable global state).
const Tables& tables() {
  static const Tables t = [] {
    Tables t;
    // GPT-2: bytes that are printable and not whitespace keep their own code point; the
    // remaining 68 bytes are shifted to 256, 257, ... in byte order.
    auto keeps_own = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    int rank = 0;
    for (int b = 0; b < 256; ++b) {
      if (keeps_own(b)) {
        t.order[rank++] = static_cast<uint8_t>(b);
        t.to_cp[b] = static_cast<uint32_t>(b);
      }
    }
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      if (!keeps_own(b)) {
        t.order[rank++] = static_cast<uint8_t>(b);
        t.to_cp[b] = next++;
      }
    }
    for (int b = 0; b < 256; ++b) append_utf8(t.to_cp[b], &t.to_utf8[b]);
    return t;
  }();
  return t;
}

// Decodes one UTF-8 code point at text[*pos], advancing *pos. Returns false if malformed.
bool next_codepoint(std::string_view text, size_t* pos, uint32_t* cp) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  size_t i = *pos;
  const size_t n = text.size();
  unsigned char c = s[i];
  int len;
  uint32_t v;
  if (c < 0x80) {
    len = 1, v = c;
  } else if ((c & 0xE0) == 0xC0) {
    len = 2, v = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3, v = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4, v = c & 0x07;
  } else {
    return false;
  }
  if (i + len > n) return false;
  for (int k = 1; k < len; ++k) {
    if ((s[i + k] & 0xC0) != 0x80) return false;
    v = (v << 6) | (s[i + k] & 0x3F);
  }
  *pos = i + len;
  *cp = v;
  return true;
}

}  // namespace

uint32_t byte_to_codepoint(uint8_t b) { return tables().to_cp[b]; }

int codepoint_to_byte(uint32_t cp) {
  // Own code points: bytes kept as themselves. Shifted ones live in 256..323.
  const Tables& t = tables();
  if (cp < 256) return t.to_cp[cp] == cp ? static_cast<int>(cp) : -1;
  if (cp < 256 + 68) {
    // The n-th shifted byte (in byte order) got code point 256 + n.
    return t.order[188 + (cp - 256)];
  }
  return -1;
}

const std::array<uint8_t, 256>& gpt2_byte_order() { return tables().order; }

std::string bytes_to_unicode(std::string_view bytes) {
  const Tables& t = tables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) out += t.to_utf8[b];
  return out;
}

bool unicode_to_bytes(std::string_view text, std::string* out) {
  out->clear();
  out->reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    uint32_t cp;
    if (!next_codepoint(text, &pos, &cp)) return false;
    const int b = codepoint_to_byte(cp);
    if (b < 0) return false;
    out->push_back(static_cast<char>(b));
  }
  return true;
}

void append_utf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace lmtrain::data
