// Blocks of one large uncompressed file, so that several readers (the ranks of a streaming run)
// share it as they share a parquet file's row groups. A block is a nominal byte range
// [begin, end); it holds the documents that START inside it, read to their end even past `end`.
// Document starts are found the same way from either side of a boundary, so the blocks of a
// file hold each of its documents exactly once, whatever the block size:
//   JSONL                        every line start
//   text with a doc_separator    the file's start, and the end of every separator line
// Text without a separator is one document per file, and .gz / .zst cannot be entered in the
// middle: neither is split.
#pragma once
#include <cstdint>
#include <memory>

#include "data/corpus/document_reader.h"
#include "data/corpus/input_files.h"

namespace lmtrain::data {

// Whether `file` can be read in blocks under `options`.
bool splits_into_blocks(const InputFile& file, const DocumentReaderOptions& options);

// The first document start at or after byte `pos` (file.size when none is left). Throws
// lmtrain::Error naming the file when it cannot be read.
uint64_t document_start_at_or_after(const InputFile& file, uint64_t pos,
                                    const DocumentReaderOptions& options);

// The documents that start in [begin, end) of `file` (splits_into_blocks must hold). where()
// names the file and the block; line numbers count from the block's first document.
std::unique_ptr<DocumentReader> open_block_reader(const InputFile& file, uint64_t begin,
                                                  uint64_t end,
                                                  const DocumentReaderOptions& options);

}  // namespace lmtrain::data
