#include "data/corpus/input_files.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "core/error.h"

namespace lmtrain::data {
namespace {

namespace fs = std::filesystem;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

void stat_input(InputFile* f) {
  struct stat st;
  if (::stat(f->path.c_str(), &st) != 0) throw Error("cannot stat input file " + f->path);
  f->size = static_cast<uint64_t>(st.st_size);
  f->mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

}  // namespace

const char* format_name(InputFormat f) {
  switch (f) {
    case InputFormat::kJsonl:
      return "jsonl";
    case InputFormat::kParquet:
      return "parquet";
    default:
      return "text";
  }
}

const char* compression_name(Compression c) {
  switch (c) {
    case Compression::kGzip:
      return "gzip";
    case Compression::kZstd:
      return "zstd";
    default:
      return "none";
  }
}

std::string describe_format(const InputFile& f) {
  std::string s = format_name(f.format);
  if (f.compression == Compression::kGzip) s += ".gz";
  if (f.compression == Compression::kZstd) s += ".zst";
  return s;
}

InputFile classify_input(const std::string& path) {
  InputFile f;
  f.path = path;
  std::string name = lower(fs::path(path).filename().string());
  if (ends_with(name, ".gz")) {
    f.compression = Compression::kGzip;
    name.resize(name.size() - 3);
  } else if (ends_with(name, ".zst")) {
    f.compression = Compression::kZstd;
    name.resize(name.size() - 4);
  }
  if (ends_with(name, ".parquet")) {
    if (f.compression != Compression::kNone) {
      throw UsageError("input " + path +
                       ": a compressed parquet file is not read (parquet compresses its pages "
                       "inside the file): decompress it to a .parquet file");
    }
    f.format = InputFormat::kParquet;
  } else if (ends_with(name, ".jsonl") || ends_with(name, ".ndjson")) {
    f.format = InputFormat::kJsonl;
  }
  return f;
}

std::vector<InputFile> list_input_files(const std::vector<std::string>& inputs) {
  std::vector<InputFile> files;
  std::set<fs::path> seen;
  auto take = [&](const fs::path& p) {
    std::error_code ec;
    const fs::path canon = fs::canonical(p, ec);
    if (ec) throw Error("cannot resolve input " + p.string() + ": " + ec.message());
    if (!seen.insert(canon).second) return;
    InputFile f = classify_input(p.string());
    stat_input(&f);
    files.push_back(std::move(f));
  };
  for (const std::string& input : inputs) {
    std::error_code ec;
    const fs::file_status st = fs::status(input, ec);
    if (ec || !fs::exists(st)) throw UsageError("input path does not exist: " + input);
    if (!fs::is_directory(st)) {
      take(input);
      continue;
    }
    std::vector<fs::path> found;
    fs::recursive_directory_iterator it(input, ec), end;
    if (ec) throw Error("cannot read input directory " + input + ": " + ec.message());
    for (; it != end; it.increment(ec)) {
      if (ec) throw Error("cannot read input directory " + input + ": " + ec.message());
      if (fs::is_regular_file(it->path())) found.push_back(it->path());  // follows symlinks
    }
    std::sort(found.begin(), found.end());
    for (const fs::path& p : found) take(p);
  }
  return files;
}

}  // namespace lmtrain::data
