// Opening a parquet file and walking its row groups (the values in the arrays they give back:
// parquet_columns.cpp). Compiled as C++20 against Arrow's headers (CMakeLists.txt): keep Arrow
// out of every header. A build configured with -DLMTRAIN_PARQUET=OFF (no pyarrow) compiles
// parquet_file_stub.cpp instead, which refuses parquet input with a message saying so.
#include "data/corpus/parquet_file.h"

#if LMTRAIN_PARQUET

#include <arrow/array.h>
#include <arrow/buffer.h>
#include <arrow/chunked_array.h>
#include <arrow/io/file.h>
#include <arrow/io/memory.h>
#include <arrow/memory_pool.h>
#include <arrow/table.h>
#include <arrow/type.h>
#include <parquet/arrow/reader.h>
#include <parquet/arrow/schema.h>
#include <parquet/exception.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.h"
#include "data/corpus/parquet_columns.h"

namespace lmtrain::data {

struct ParquetFile::Impl {
  arrow::ProxyMemoryPool pool{arrow::default_memory_pool()};
  std::unique_ptr<parquet::arrow::FileReader> reader;
  std::shared_ptr<parquet::FileMetaData> metadata;
  int leaf = -1;            // the column's leaf index in the file
  std::vector<int> leaves;  // a nested column's leaf indices (for_each_parquet_json_row)
  std::shared_ptr<arrow::ChunkedArray> column;
  std::vector<int64_t> chunk_starts;  // first row of each chunk of `column`, then its length
};

namespace {

std::string column_names(const arrow::Schema& schema) {
  std::string s;
  for (int i = 0; i < schema.num_fields(); ++i) {
    s += (i ? ", " : "") + schema.field(i)->name();
    if (i == 19 && schema.num_fields() > 20) {
      s += ", ... (" + std::to_string(schema.num_fields()) + " columns)";
      break;
    }
  }
  return s.empty() ? "none" : s;
}

// The most rows one row group may claim: a row group is read whole, and a corrupt footer that
// claims billions of rows would make Arrow allocate gigabytes for it (found by the fuzzer: 34e9
// rows in 187 bytes). 2^26 is pyarrow's largest default row-group size (older releases), so no
// file a default writer made is refused.
constexpr int64_t kMaxRowGroupRows = int64_t{1} << 26;

// Refuses row group `g` of `metadata` when it claims more rows than that; `what` names the file.
void check_row_count(const parquet::FileMetaData& metadata, int g, const std::string& what) {
  int64_t rows = 0;
  try {
    rows = metadata.RowGroup(g)->num_rows();
  } catch (const parquet::ParquetException& e) {
    throw Error(what + " row group " + std::to_string(g) + ": unreadable metadata: " + e.what());
  }
  if (rows < 0 || rows > kMaxRowGroupRows) {
    throw Error(what + " row group " + std::to_string(g) + " claims " + std::to_string(rows) +
                " rows: more than the " + std::to_string(kMaxRowGroupRows) +
                " lmtrain reads at once (a corrupt footer, or rewrite the file with smaller row "
                "groups)");
  }
}

// The leaf columns under a schema field (itself when it is one).
void collect_parquet_leaves(const parquet::arrow::SchemaField& f, std::vector<int>* out) {
  if (f.is_leaf()) {
    out->push_back(f.column_index);
    return;
  }
  for (const auto& c : f.children) collect_parquet_leaves(c, out);
}

// Opens the reader over `input`; `what` names the file in errors. nested: any column type (read
// as JSON, for_each_parquet_json_row), else a text column.
void open_impl(ParquetFile::Impl* impl, std::shared_ptr<arrow::io::RandomAccessFile> input,
               const std::string& what, const std::string& column,
               const std::string& column_setting, bool nested = false) {
  try {
    // No pre-buffering and no reader threads: pre-buffering reads ahead asynchronously on
    // Arrow's IO thread pool into `pool`, and a read still in flight when this file is closed
    // would free its buffer into a pool that is gone (a crash seen in StreamLoader's tests).
    // Row groups are read one at a time anyway; our threads tokenize.
    parquet::ArrowReaderProperties properties;
    properties.set_pre_buffer(false);
    properties.set_use_threads(false);
    parquet::arrow::FileReaderBuilder builder;
    auto st = builder.Open(std::move(input));
    if (!st.ok()) {
      throw Error(what +
                  " is not a readable parquet file (corrupt or truncated?): " + st.message());
    }
    auto opened = builder.memory_pool(&impl->pool)->properties(properties)->Build();
    if (!opened.ok()) {
      throw Error(what + " is not a readable parquet file (corrupt or truncated?): " +
                  opened.status().message());
    }
    impl->reader = std::move(*opened);
  } catch (const parquet::ParquetException& e) {
    throw Error(what + " is not a readable parquet file (corrupt or truncated?): " + e.what());
  }
  impl->metadata = impl->reader->parquet_reader()->metadata();
  std::shared_ptr<arrow::Schema> schema;
  const auto st = impl->reader->GetSchema(&schema);
  if (!st.ok()) throw Error(what + ": cannot read its schema: " + st.message());
  const int field = schema->GetFieldIndex(column);
  if (field < 0) {
    throw Error(what + " has no column \"" + column + "\" (its columns: " + column_names(*schema) +
                "): name the text column with " + column_setting);
  }
  const auto& type = schema->field(field)->type();
  if (nested) {
    collect_parquet_leaves(impl->reader->manifest().schema_fields[static_cast<size_t>(field)],
                           &impl->leaves);
    return;
  }
  if (!parquet_is_text_type(*type)) {
    throw Error(what + ": column \"" + column + "\" has type " + type->ToString() +
                ", not a string type (string, large_string, string_view, or a dictionary of "
                "one)");
  }
  const auto& sf = impl->reader->manifest().schema_fields[static_cast<size_t>(field)];
  if (!sf.is_leaf()) throw Error(what + ": column \"" + column + "\" is not a flat column");
  impl->leaf = sf.column_index;
}

}  // namespace

ParquetFile::ParquetFile(const std::string& path, const std::string& column,
                         const std::string& column_setting)
    : path_(path), impl_(std::make_unique<Impl>()) {
  auto file = arrow::io::ReadableFile::Open(path, &impl_->pool);
  if (!file.ok()) throw Error("cannot open input file " + path + ": " + file.status().message());
  open_impl(impl_.get(), *file, "input file " + path, column, column_setting);
}

ParquetFile::~ParquetFile() = default;

int ParquetFile::num_row_groups() const { return impl_->reader->num_row_groups(); }

int64_t ParquetFile::num_rows() const { return impl_->metadata->num_rows(); }

int64_t ParquetFile::num_rows(int row_group) const {
  check_row_group(row_group);
  return impl_->metadata->RowGroup(row_group)->num_rows();
}

uint64_t ParquetFile::row_group_compressed_bytes(int row_group) const {
  check_row_group(row_group);
  return static_cast<uint64_t>(
      std::max<int64_t>(0, impl_->metadata->RowGroup(row_group)->total_compressed_size()));
}

void ParquetFile::check_row_group(int row_group) const {
  if (row_group < 0 || row_group >= num_row_groups()) {
    throw Error("input file " + path_ + " has " + std::to_string(num_row_groups()) +
                " row groups: no row group " + std::to_string(row_group));
  }
}

void ParquetFile::load_row_group(int row_group) {
  check_row_group(row_group);
  const std::string where = "input file " + path_ + " row group " + std::to_string(row_group) +
                            " of " + std::to_string(num_row_groups());
  check_row_count(*impl_->metadata, row_group, "input file " + path_);
  impl_->column.reset();  // release the previous row group first: one in memory at a time
  impl_->chunk_starts.clear();
  loaded_ = -1;
  std::shared_ptr<arrow::Table> table;
  try {
    auto read = impl_->reader->ReadRowGroup(row_group, {impl_->leaf});
    if (!read.ok()) {
      throw Error(where + " cannot be read (corrupt or truncated?): " + read.status().message());
    }
    table = std::move(*read);
  } catch (const parquet::ParquetException& e) {
    throw Error(where + " cannot be read (corrupt or truncated?): " + e.what());
  }
  if (table->num_columns() != 1) throw Error(where + ": expected one column");
  impl_->column = table->column(0);
  if (!parquet_is_text_type(*impl_->column->type())) {
    throw Error(where + ": column has type " + impl_->column->type()->ToString() +
                ", not a string type");
  }
  int64_t start = 0;
  for (const auto& chunk : impl_->column->chunks()) {
    impl_->chunk_starts.push_back(start);
    start += chunk->length();
  }
  impl_->chunk_starts.push_back(start);
  if (start != num_rows(row_group)) {
    throw Error(where + ": read " + std::to_string(start) + " rows, its footer says " +
                std::to_string(num_rows(row_group)) + " (corrupt?)");
  }
  loaded_ = row_group;
}

int64_t ParquetFile::loaded_rows() const {
  return impl_->chunk_starts.empty() ? 0 : impl_->chunk_starts.back();
}

std::optional<std::string_view> ParquetFile::value(int64_t row) const {
  const auto& starts = impl_->chunk_starts;
  if (row < 0 || row >= loaded_rows()) {
    throw Error("row " + std::to_string(row) + " is outside the loaded row group of " + path_);
  }
  const size_t c =
      static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), row) - starts.begin() - 1);
  const arrow::Array& chunk = *impl_->column->chunk(static_cast<int>(c));
  return parquet_text_at(chunk, row - starts[c]);
}

int64_t ParquetFile::arrow_bytes() const { return impl_->pool.bytes_allocated(); }

int64_t ParquetFile::peak_arrow_bytes() const { return impl_->pool.max_memory(); }

void read_parquet_buffer(const std::string& data, const std::string& column,
                         const std::function<void(int, int64_t, std::string_view)>& fn) {
  ParquetFile::Impl impl;
  auto buffer = std::make_shared<arrow::Buffer>(reinterpret_cast<const uint8_t*>(data.data()),
                                                static_cast<int64_t>(data.size()));
  open_impl(&impl, std::make_shared<arrow::io::BufferReader>(buffer), "parquet buffer", column,
            "--text_column NAME");
  for (int rg = 0; rg < impl.reader->num_row_groups(); ++rg) {
    check_row_count(*impl.metadata, rg, "parquet buffer");
    std::shared_ptr<arrow::Table> table;
    try {
      auto read = impl.reader->ReadRowGroup(rg, {impl.leaf});
      if (!read.ok())
        throw Error("parquet buffer row group " + std::to_string(rg) + ": " +
                    read.status().message());
      table = std::move(*read);
    } catch (const parquet::ParquetException& e) {
      throw Error("parquet buffer row group " + std::to_string(rg) + ": " + e.what());
    }
    int64_t row = 0;
    for (const auto& chunk : table->column(0)->chunks()) {
      for (int64_t i = 0; i < chunk->length(); ++i, ++row) {
        if (const auto text = parquet_text_at(*chunk, i)) fn(rg, row, *text);
      }
    }
  }
}

namespace {

// Every row of the nested column of `impl` as JSON text, row group by row group.
void parquet_json_rows(ParquetFile::Impl& impl, const std::string& what,
                       const std::function<void(int64_t, const std::string&)>& fn) {
  int64_t row = 0;
  for (int rg = 0; rg < impl.reader->num_row_groups(); ++rg) {
    check_row_count(*impl.metadata, rg, what);
    const std::string where = what + " row group " + std::to_string(rg);
    std::shared_ptr<arrow::Table> table;
    try {
      auto read = impl.reader->ReadRowGroup(rg, impl.leaves);
      if (!read.ok()) throw Error(where + " cannot be read: " + read.status().message());
      table = std::move(*read);
    } catch (const parquet::ParquetException& e) {
      throw Error(where + " cannot be read: " + e.what());
    }
    if (table->num_columns() != 1) throw Error(where + ": expected one column");
    for (const auto& chunk : table->column(0)->chunks()) {
      for (int64_t i = 0; i < chunk->length(); ++i, ++row) {
        if (chunk->IsNull(i)) continue;
        std::string text;
        try {
          text = parquet_json_value(*chunk, i, 0).dump();
        } catch (const Error& e) {
          throw Error(what + " row " + std::to_string(row + 1) + ": " + e.what());
        } catch (const nlohmann::json::exception&) {
          throw Error(what + " row " + std::to_string(row + 1) + " holds invalid UTF-8");
        }
        fn(row, text);
      }
    }
  }
}

}  // namespace

void for_each_parquet_json_row(const std::string& path, const std::string& column,
                               const std::function<void(int64_t, const std::string&)>& fn) {
  ParquetFile::Impl impl;
  auto file = arrow::io::ReadableFile::Open(path, &impl.pool);
  if (!file.ok()) throw Error("cannot open input file " + path + ": " + file.status().message());
  open_impl(&impl, *file, "input file " + path, column, "a column of that name", true);
  parquet_json_rows(impl, "input file " + path, fn);
}

void read_parquet_json_buffer(const std::string& data, const std::string& column,
                              const std::function<void(int64_t, const std::string&)>& fn) {
  ParquetFile::Impl impl;
  auto buffer = std::make_shared<arrow::Buffer>(reinterpret_cast<const uint8_t*>(data.data()),
                                                static_cast<int64_t>(data.size()));
  open_impl(&impl, std::make_shared<arrow::io::BufferReader>(buffer), "parquet buffer", column,
            "a column of that name", true);
  parquet_json_rows(impl, "parquet buffer", fn);
}

}  // namespace lmtrain::data

#endif  // LMTRAIN_PARQUET
