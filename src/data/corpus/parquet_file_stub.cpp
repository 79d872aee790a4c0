// parquet_file.h without Arrow: a build configured with -DLMTRAIN_PARQUET=OFF (no pyarrow)
// refuses parquet input with a message saying so.
#include "data/corpus/parquet_file.h"

#if !LMTRAIN_PARQUET

#include "core/error.h"

namespace lmtrain::data {

struct ParquetFile::Impl {};

namespace {
[[noreturn]] void no_parquet(const std::string& what) {
  throw UsageError(what +
                   ": this lmtrain was built without parquet input (configured with "
                   "LMTRAIN_PARQUET=OFF, no pyarrow): install pyarrow (scripts/setup.sh) and "
                   "rebuild, or convert the file to JSONL");
}
}  // namespace

ParquetFile::ParquetFile(const std::string& path, const std::string&, const std::string&)
    : path_(path) {
  no_parquet("input file " + path);
}
ParquetFile::~ParquetFile() = default;
int ParquetFile::num_row_groups() const { return 0; }
int64_t ParquetFile::num_rows() const { return 0; }
int64_t ParquetFile::num_rows(int) const { return 0; }
uint64_t ParquetFile::row_group_compressed_bytes(int) const { return 0; }
void ParquetFile::check_row_group(int) const {}
void ParquetFile::load_row_group(int) { no_parquet("input file " + path_); }
int64_t ParquetFile::loaded_rows() const { return 0; }
std::optional<std::string_view> ParquetFile::value(int64_t) const { return std::nullopt; }
int64_t ParquetFile::arrow_bytes() const { return 0; }
int64_t ParquetFile::peak_arrow_bytes() const { return 0; }
void read_parquet_buffer(const std::string&, const std::string&,
                         const std::function<void(int, int64_t, std::string_view)>&) {
  no_parquet("parquet buffer");
}
void for_each_parquet_json_row(const std::string& path, const std::string&,
                               const std::function<void(int64_t, const std::string&)>&) {
  no_parquet("input file " + path);
}
void read_parquet_json_buffer(const std::string&, const std::string&,
                              const std::function<void(int64_t, const std::string&)>&) {
  no_parquet("parquet buffer");
}

}  // namespace lmtrain::data

#endif  // LMTRAIN_PARQUET
