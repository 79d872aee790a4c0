// The input files of `lmtrain prepare` (and of a loader that reads raw corpora): which files a
// list of paths names, and the format each one is read in.
//
//   *.parquet                         parquet, one document per row of the text column
//   *.jsonl, *.ndjson                 JSON lines, one object with a text field per line
//   anything else                     text: one document per file, or per --doc_separator line
//   + .gz / .zst after any of the two text formats: the same, decompressed while read
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace lmtrain::data {

enum class InputFormat { kText, kJsonl, kParquet };
enum class Compression { kNone, kGzip, kZstd };

struct InputFile {
  std::string path;
  InputFormat format = InputFormat::kText;
  Compression compression = Compression::kNone;
  uint64_t size = 0;     // bytes on disk
  int64_t mtime_ns = 0;  // last modification, to notice a file changed between runs
};

const char* format_name(InputFormat f);       // "text", "jsonl", "parquet"
const char* compression_name(Compression c);  // "none", "gzip", "zstd"
// "jsonl.zst", "text", "parquet": how prepare.json names a file's format.
std::string describe_format(const InputFile& f);

// The format of `path` from its name (see above). Throws UsageError for a compressed parquet
// file (parquet compresses inside the file; name it .parquet).
InputFile classify_input(const std::string& path);

// Every input file in order: each path as given; a directory expanded recursively, its files
// in sorted path order. A file reached twice (e.g. through a symlink) is listed once. Throws
// UsageError naming a path that does not exist, Error for an unreadable directory.
std::vector<InputFile> list_input_files(const std::vector<std::string>& inputs);

}  // namespace lmtrain::data
