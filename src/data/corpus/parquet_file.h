// One string column of a parquet file, read one row group at a time through Arrow/Parquet C++
// (the pyarrow wheel's libparquet / libarrow): memory holds one row group's column, never the
// file. Row groups are the unit a loader strides by rank (row group r, r + world, ...).
//
// No Arrow type appears here: parquet_file.cpp is the one file compiled against Arrow's
// headers (C++20; see CMakeLists.txt).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace lmtrain::data {

class ParquetFile {
 public:
  // Opens `path` and finds `column`. Throws lmtrain::Error naming the file when it is not a
  // readable parquet file (corrupt, truncated), has no such column (naming the columns it
  // has, and `column_setting`: how the user names another), or the column is not a string
  // column (naming its type).
  ParquetFile(const std::string& path, const std::string& column,
              const std::string& column_setting = "--text_column NAME");
  ~ParquetFile();
  ParquetFile(const ParquetFile&) = delete;
  ParquetFile& operator=(const ParquetFile&) = delete;

  const std::string& path() const { return path_; }
  int num_row_groups() const;
  int64_t num_rows() const;
  int64_t num_rows(int row_group) const;
  // Compressed bytes of a row group (all columns), from the footer: progress through a file.
  uint64_t row_group_compressed_bytes(int row_group) const;

  // Reads the column of one row group, replacing the one loaded before. Throws lmtrain::Error
  // naming the file and the row group when its pages are corrupt.
  void load_row_group(int row_group);
  int loaded_row_group() const { return loaded_; }  // -1 before the first load
  int64_t loaded_rows() const;
  // The value of row `row` of the loaded row group; nullopt for a null. Valid until the next
  // load_row_group.
  std::optional<std::string_view> value(int64_t row) const;

  // Bytes Arrow allocated for this file: now, and at most so far (the memory bound: one row
  // group's column and its decoding buffers).
  int64_t arrow_bytes() const;
  int64_t peak_arrow_bytes() const;

  struct Impl;  // Arrow's reader and the loaded column (parquet_file.cpp)

 private:
  void check_row_group(int row_group) const;
  std::string path_;
  std::unique_ptr<Impl> impl_;
  int loaded_ = -1;
};

// A nested column (a conversations file's `messages`: list<struct<role, content, ...>>), row
// group by row group: calls fn(row, json) for every non-null row (row counted from 0 over the
// file) with its value as JSON text: lists as arrays, structs as objects without their null
// fields (a null field is an absent key), strings, integers, floats, booleans. Throws
// lmtrain::Error naming the file when it is not a readable parquet file, has no such column
// (naming the columns it has) or holds a type without a JSON form (naming it).
void for_each_parquet_json_row(const std::string& path, const std::string& column,
                               const std::function<void(int64_t, const std::string&)>& fn);
// The same over parquet bytes in memory (the fuzz target).
void read_parquet_json_buffer(const std::string& data, const std::string& column,
                              const std::function<void(int64_t, const std::string&)>& fn);

// Parquet bytes in memory as a file (for the fuzz target): writes nothing, reads through the
// same code. Calls fn(row_group, row, value) for every non-null value of `column`.
void read_parquet_buffer(const std::string& data, const std::string& column,
                         const std::function<void(int, int64_t, std::string_view)>& fn);

}  // namespace lmtrain::data
