// GPT-2's byte-level alphabet: every byte 0..255 is mapped to one printable Unicode code point
// so that BPE vocabularies can be stored as JSON strings ("Ġ" is the space byte, "Ċ" is '\n').
// The tokenizer works on raw bytes internally; this mapping is only used at the file boundary
// (encoder.json, vocab.bpe, tokenizer.json).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace lmtrain::data {

// Code point that byte b is written as (GPT-2's bytes_to_unicode()).
uint32_t byte_to_codepoint(uint8_t b);

// Inverse of byte_to_codepoint: the byte, or -1 if `cp` is not part of the alphabet.
int codepoint_to_byte(uint32_t cp);

// The GPT-2 id order of single bytes: printable bytes first, then the rest (this is why the
// space byte "Ġ" has id 220 in GPT-2's vocabulary). Entry i is the byte with rank i.
const std::array<uint8_t, 256>& gpt2_byte_order();

// Raw bytes -> UTF-8 string of mapped code points (each byte becomes one code point).
std::string bytes_to_unicode(std::string_view bytes);

// UTF-8 string of mapped code points -> raw bytes. Returns false (leaving *out unspecified)
// when the text is not valid UTF-8 or holds a code point outside the byte alphabet.
bool unicode_to_bytes(std::string_view text, std::string* out);

// Appends the UTF-8 encoding of `cp` to *out.
void append_utf8(uint32_t cp, std::string* out);

}  // namespace lmtrain::data
