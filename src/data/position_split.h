// The split of a corpus with too few documents for the content-hash split (data/document_hash.h:
// one book, five fortune files): each document's last val_fraction of bytes, cut at a line
// boundary, is validation text and the rest training text. A text document longer than
// --max_document_bytes is read in pieces (data/corpus/document_reader.h) and split by its whole
// size, known from an earlier pass: memory stays bounded whatever the document's size.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string_view>

#include "data/corpus/corpus_reader.h"

namespace lmtrain::data {

// Where the validation part of `text` starts: just after the '\n' nearest before the point that
// leaves val_fraction of the bytes after it (else the first one after it). text.size() when the
// document cannot be cut so that both parts hold more than whitespace (no line boundary, or
// only blank lines on one side): it is then training text alone.
size_t position_split_cut(std::string_view text, double val_fraction);

// The whole size of each document read in pieces, by its first piece's position.
using PiecedDocumentSizes = std::map<CorpusPosition, uint64_t>;

// The same for a document read (`text`), which may be one piece of a longer document: the cut
// goes by the whole document's size (`sizes`), so a piece before the cut is all training text
// and one after it all validation text (0). Throws lmtrain::Error when `sizes` lacks it.
size_t position_split_cut(std::string_view text, const PieceOfDocument& piece,
                          const PiecedDocumentSizes& sizes, double val_fraction);

}  // namespace lmtrain::data
