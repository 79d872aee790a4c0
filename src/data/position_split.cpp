#include "data/position_split.h"

#include <cctype>
#include <cmath>
#include <string>

#include "core/error.h"
#include "data/corpus/document_reader.h"

namespace lmtrain::data {
namespace {

size_t split_target(uint64_t size, double val_fraction) {
  return static_cast<size_t>(std::llround(static_cast<double>(size) * (1 - val_fraction)));
}

}  // namespace

size_t position_split_cut(std::string_view text, double val_fraction) {
  const size_t n = text.size();
  // Measured on the text without its trailing whitespace: a final newline is no place to cut.
  size_t end = n;
  while (end > 0 && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  if (end < 2) return n;
  const size_t target = split_target(end, val_fraction);
  size_t cut = n;
  const size_t before = target == 0 ? std::string_view::npos : text.rfind('\n', target - 1);
  if (before != std::string_view::npos) {
    cut = before + 1;
  } else {
    const size_t after = text.find('\n', target);
    if (after != std::string_view::npos && after + 1 < end) cut = after + 1;
  }
  if (cut >= n || is_blank(text.substr(0, cut)) || is_blank(text.substr(cut))) return n;
  return cut;
}

size_t position_split_cut(std::string_view text, const PieceOfDocument& piece,
                          const PiecedDocumentSizes& sizes, double val_fraction) {
  if (piece.whole()) return position_split_cut(text, val_fraction);
  const auto it = sizes.find(piece.first);
  if (it == sizes.end()) {
    throw Error("prepare: no size recorded for the document read in pieces from file " +
                std::to_string(piece.first.file) + ", document " +
                std::to_string(piece.first.document) + " (did the input change?)");
  }
  const size_t target = split_target(it->second, val_fraction);
  if (piece.offset + text.size() <= target) return text.size();
  if (piece.offset >= target) return 0;
  // The reader cuts pieces after a line, so a piece's start is a line boundary too.
  const size_t local = target - piece.offset;
  const size_t before = text.rfind('\n', local - 1);
  return before == std::string_view::npos ? 0 : before + 1;
}

}  // namespace lmtrain::data
