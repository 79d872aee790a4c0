// Blocks of a large uncompressed file (data/corpus/file_blocks.cpp: a streaming run's units):
// for any content and any block size, the documents of the blocks, concatenated, are the whole
// file's documents, each once, in order. The file is written to a temporary path (the block
// reader seeks in real files). Seeds: the corpus_documents seeds' plain files.
//   byte 0: bit 0 JSONL (else text with "%" separator lines); bits 1-7 the number of blocks
//           (1-128: a block is the file's size over it, at least one byte)
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "data/corpus/file_blocks.h"
#include "fuzz_util.h"

namespace {

std::vector<std::string> documents_of(std::unique_ptr<lmtrain::data::DocumentReader> reader) {
  std::vector<std::string> docs;
  std::string text;
  while (reader->next(&text)) docs.push_back(text);
  return docs;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const std::string path =
      "/tmp/lmtrain_fuzz_file_blocks_" + std::to_string(::getpid()) + ".txt";
  const bool jsonl = data[0] & 1;
  const uint64_t blocks = 1 + (data[0] >> 1);
  const uint64_t block = std::max<uint64_t>(1, (size - 1) / blocks);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  std::fwrite(data + 1, 1, size - 1, f);
  std::fclose(f);
  lmtrain::data::DocumentReaderOptions opt;
  if (!jsonl) opt.doc_separator = "%";
  lmtrain::data::InputFile file;
  file.path = path;
  file.format = jsonl ? lmtrain::data::InputFormat::kJsonl : lmtrain::data::InputFormat::kText;
  file.size = size - 1;
  lmtrain::fuzz::expect_only_lmtrain_errors([&] {
    std::vector<std::string> whole;
    try {
      whole = documents_of(lmtrain::data::open_document_reader(file, opt));
    } catch (const lmtrain::Error&) {
      return;  // invalid JSON: the blocks would fail alike; nothing to compare
    }
    std::vector<std::string> joined;
    for (uint64_t b = 0; b < file.size; b += block) {
      for (auto& d : documents_of(
               lmtrain::data::open_block_reader(file, b, std::min(b + block, file.size), opt))) {
        joined.push_back(std::move(d));
      }
    }
    if (joined != whole) std::abort();  // a document lost, cut or read twice
  });
  return 0;
}
