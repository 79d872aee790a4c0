#include "data/corpus/parquet_file.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/corpus/corpus_test_util.h"
#include "data/corpus/document_reader.h"
#include "data/corpus/input_files.h"
#include "test_util.h"

namespace lmtrain::data {
namespace {

using testing::TempDir;
using testing::write_parquet;
using testing::write_text;

std::string parquet_error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<std::optional<std::string>> parquet_rows_of(int n) {
  std::vector<std::optional<std::string>> rows;
  for (int i = 0; i < n; ++i) {
    if (i % 10 == 3) {
      rows.push_back(std::nullopt);  // nulls are no documents
    } else {
      rows.push_back("row " + std::to_string(i) + " \xE2\x82\xAC " +
                     std::string(static_cast<size_t>(i % 13) * 17, 'q'));
    }
  }
  return rows;
}

// pyarrow writes several row groups; the C++ reader gives every row back, row group by row
// group, and a file's row groups can be read in any order (a loader strides them by rank).
TEST(ParquetFile, ReadsEveryRowGroupAsPyarrowWroteIt) {
  LMTRAIN_SKIP_WITHOUT_PARQUET();
  TempDir dir("lmtrain_parquet");
  const auto rows = parquet_rows_of(100);
  ASSERT_EQ(write_parquet(dir.file("t.parquet"), rows, 16, "text", "string", true), 7);
  ParquetFile f(dir.file("t.parquet"), "text");
  EXPECT_EQ(f.num_row_groups(), 7);
  EXPECT_EQ(f.num_rows(), 100);
  int64_t row = 0;
  for (int g : {6, 0, 1, 2, 3, 4, 5}) {  // out of order on purpose
    f.load_row_group(g);
    EXPECT_EQ(f.loaded_row_group(), g);
    EXPECT_EQ(f.loaded_rows(), f.num_rows(g));
    EXPECT_GT(f.row_group_compressed_bytes(g), 0u);
    for (int64_t r = 0; r < f.loaded_rows(); ++r) {
      const auto v = f.value(r);
      const auto& want = rows[static_cast<size_t>(g * 16 + r)];
      ASSERT_EQ(v.has_value(), want.has_value()) << g << " " << r;
      if (v) {
        EXPECT_EQ(std::string(*v), *want);
      }
    }
    row += f.loaded_rows();
  }
  EXPECT_EQ(row, 100);
  EXPECT_THROW(f.load_row_group(7), Error);

  // large_string reads the same.
  ASSERT_EQ(write_parquet(dir.file("l.parquet"), rows, 50, "content", "large_string"), 2);
  DocumentReaderOptions opt;
  opt.text_column = "content";
  auto reader = open_document_reader(classify_input(dir.file("l.parquet")), opt);
  std::vector<std::string> docs;
  std::string text;
  while (reader->next(&text)) docs.push_back(text);
  std::vector<std::string> want;
  for (const auto& r : rows) {
    if (r) want.push_back(*r);
  }
  EXPECT_EQ(docs, want);
  EXPECT_NE(reader->where().find("row group 1"), std::string::npos) << reader->where();
}

// A dictionary-encoded text column (a categorical: each row an index into distinct strings,
// with nulls) reads as the strings themselves, through the reader and the in-memory path alike.
TEST(ParquetFile, DictionaryEncodedTextReadsAsItsStrings) {
  LMTRAIN_SKIP_WITHOUT_PARQUET();
  TempDir dir("lmtrain_parquet_dict");
  std::vector<std::optional<std::string>> rows;
  for (int i = 0; i < 90; ++i) {
    if (i % 11 == 5) {
      rows.push_back(std::nullopt);
    } else {
      rows.push_back("label " + std::to_string(i % 7) + " \xC3\xA9t\xC3\xA9");  // repeats
    }
  }
  ASSERT_EQ(write_parquet(dir.file("d.parquet"), rows, 40, "text", "dictionary", true), 3);
  auto reader = open_document_reader(classify_input(dir.file("d.parquet")), {});
  std::vector<std::string> docs, want;
  std::string text;
  while (reader->next(&text)) docs.push_back(text);
  for (const auto& r : rows) {
    if (r) want.push_back(*r);
  }
  EXPECT_EQ(docs, want);

  std::vector<std::string> from_buffer;
  read_parquet_buffer(testing::read_text(dir.file("d.parquet")), "text",
                      [&](int, int64_t, std::string_view v) { from_buffer.emplace_back(v); });
  EXPECT_EQ(from_buffer, want);
}

// The memory bound: Arrow's allocations for the file never exceed a few row groups' worth, far
// below the whole column.
TEST(ParquetFile, HoldsOneRowGroupAtATime) {
  LMTRAIN_SKIP_WITHOUT_PARQUET();
  TempDir dir("lmtrain_parquet");
  std::vector<std::optional<std::string>> rows;
  for (int i = 0; i < 4000; ++i) {
    std::string s;
    for (int k = 0; k < 60; ++k) s += std::to_string((i * 7919 + k * 104729) % 1000003) + " ";
    rows.push_back(s);
  }
  size_t total = 0;
  for (const auto& r : rows) total += r->size();
  ASSERT_EQ(write_parquet(dir.file("big.parquet"), rows, 200), 20);
  auto reader = open_document_reader(classify_input(dir.file("big.parquet")), {});
  std::string text;
  size_t n = 0;
  while (reader->next(&text)) ++n;
  EXPECT_EQ(n, rows.size());
  const size_t one_group = total / 20;
  EXPECT_GT(reader->peak_buffer_bytes(), one_group / 2);
  EXPECT_LT(reader->peak_buffer_bytes(), 4 * one_group)
      << "Arrow held " << reader->peak_buffer_bytes() << " bytes; one row group has about "
      << one_group << " of text, the file " << total;
}

// A footer that claims billions of rows in a row group (the fuzzer's find: 34e9 rows in 187
// bytes) is refused before Arrow allocates for them, naming the row group and the count.
TEST(ParquetFile, ARowGroupClaimingBillionsOfRowsIsRefused) {
  LMTRAIN_SKIP_WITHOUT_PARQUET();
  const std::string bytes = testing::read_text(
      testing::source_dir() + "/fuzz/regressions/parquet_column/row_group_claims_34e9_rows");
  const std::string msg = parquet_error_of(
      [&] { read_parquet_buffer(bytes, "text", [](int, int64_t, std::string_view) {}); });
  EXPECT_NE(msg.find("row group 0 claims 33923462778 rows"), std::string::npos) << msg;
}

TEST(ParquetFile, BadFilesAreNamed) {
  LMTRAIN_SKIP_WITHOUT_PARQUET();
  TempDir dir("lmtrain_parquet");
  const auto rows = parquet_rows_of(40);
  write_parquet(dir.file("ok.parquet"), rows, 10, "text", "string", true);
  // A missing column names the columns there are.
  std::string msg = parquet_error_of([&] { ParquetFile f(dir.file("ok.parquet"), "body"); });
  EXPECT_NE(msg.find("ok.parquet has no column \"body\" (its columns: id, text)"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("--text_column"), std::string::npos) << msg;
  // A column that is not a string.
  msg = parquet_error_of([&] { ParquetFile f(dir.file("ok.parquet"), "id"); });
  EXPECT_NE(msg.find("column \"id\" has type int64, not a string type"), std::string::npos) << msg;
  write_parquet(dir.file("bin.parquet"), rows, 10, "text", "binary");
  msg = parquet_error_of([&] { ParquetFile f(dir.file("bin.parquet"), "text"); });
  EXPECT_NE(msg.find("bin.parquet: column \"text\" has type binary"), std::string::npos) << msg;

  const std::string bytes = testing::read_text(dir.file("ok.parquet"));
  // Truncated: the footer is gone.
  write_text(dir.file("cut.parquet"), bytes.substr(0, bytes.size() / 2));
  msg = parquet_error_of([&] { ParquetFile f(dir.file("cut.parquet"), "text"); });
  EXPECT_NE(msg.find("cut.parquet is not a readable parquet file"), std::string::npos) << msg;
  write_text(dir.file("text.parquet"), "just some text, not parquet at all");
  msg = parquet_error_of([&] { ParquetFile f(dir.file("text.parquet"), "text"); });
  EXPECT_NE(msg.find("text.parquet is not a readable parquet file"), std::string::npos) << msg;
  // Corrupt pages, footer intact: the error names the row group.
  std::string corrupt = bytes;
  for (size_t i = 4; i < corrupt.size() / 2; ++i) corrupt[i] = static_cast<char>(corrupt[i] ^ 0x3C);
  write_text(dir.file("corrupt.parquet"), corrupt);
  msg = parquet_error_of([&] {
    auto r = open_document_reader(classify_input(dir.file("corrupt.parquet")), {});
    std::string t;
    while (r->next(&t)) {
    }
  });
  EXPECT_NE(msg.find("corrupt.parquet row group "), std::string::npos) << msg;
}

}  // namespace
}  // namespace lmtrain::data
