// The corpus document readers of prepare (data/corpus/): text and JSONL, plain or decompressed
// from .gz (zlib) / .zst (libzstd), with bounded buffers. The first input byte picks the
// format, the compression and the options; the rest is the file as it would be on disk
// (compressed for .gz / .zst). Seeds: fuzz/make_corpus_seeds.py.
//   byte 0: bit 0 JSONL (else text), bits 1-2 compression (0 none, 1 gzip, 2 zstd),
//           bit 3 "%" separator lines, bit 4 tiny buffers (7-byte reads, 64-byte documents)
#include <string>

#include "data/corpus/document_reader.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  using lmtrain::data::Compression;
  using lmtrain::data::InputFormat;
  const InputFormat format = (mode & 1) ? InputFormat::kJsonl : InputFormat::kText;
  const int c = (mode >> 1) & 3;
  const Compression compression = c == 1   ? Compression::kGzip
                                  : c == 2 ? Compression::kZstd
                                           : Compression::kNone;
  lmtrain::data::DocumentReaderOptions opt;
  if (mode & 8) opt.doc_separator = "%";
  const bool tiny = mode & 16;
  opt.read_buffer_bytes = tiny ? 7 : 4096;
  opt.max_document_bytes = tiny ? 64 : 1 << 16;
  lmtrain::fuzz::expect_only_lmtrain_errors([&] {
    auto source = lmtrain::data::open_memory_byte_source(
        std::string(reinterpret_cast<const char*>(data + 1), size - 1), "fuzz_input", compression,
        opt.read_buffer_bytes);
    auto reader = lmtrain::data::make_document_reader(std::move(source), format, opt);
    std::string text;
    size_t total = 0;
    while (reader->next(&text)) {
      if (text.empty() || text.size() > opt.max_document_bytes) std::abort();  // the contract
      total += text.size();
      if (reader->peak_buffer_bytes() >
          2 * opt.max_document_bytes + 3 * opt.read_buffer_bytes + 8192) {
        std::abort();  // the memory bound
      }
    }
    (void)total;
  });
  return 0;
}
