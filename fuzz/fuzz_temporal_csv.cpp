// Series from a CSV file (data/temporal/csv_series.h): any bytes either parse into series whose
// values are finite and whose masks match, or fail with an lmtrain::Error.
//
// Column detection: the input's lines, as the cells of a first column under a header that names
// no timestamp, beside a column of numbers. That column may only be taken as the timestamp
// column when every one of its non-empty cells is a timestamp (by its whole content, never one
// cell), and only read as a series when every non-empty cell was a number; anything else is an
// error.
#include <cctype>
#include <cmath>
#include <string>
#include <vector>

#include "data/temporal/csv_series.h"
#include "data/temporal/timestamp_cell.h"
#include "fuzz_util.h"

namespace {

namespace dt = lmtrain::data::temporal;

void check_series_values(const dt::CsvSeries& c) {
  if (c.names.size() != c.series.size() || c.series.empty()) __builtin_trap();
  for (const auto& s : c.series) {
    if (s.channels != 1 || s.length < 1 || s.length > 4096) __builtin_trap();
    if (s.values.size() != static_cast<size_t>(s.length) || s.valid.size() != s.values.size()) {
      __builtin_trap();
    }
    for (size_t i = 0; i < s.values.size(); ++i) {
      if (!std::isfinite(s.values[i]) || s.valid[i] > 1 || (!s.valid[i] && s.values[i] != 0)) {
        __builtin_trap();
      }
    }
  }
}

std::string trimmed(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

void check_first_column_detection(const std::string& text) {
  std::vector<std::string> cells;
  std::string csv = "c0,v\n", cell;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == '\n') {
      csv += cell + ",1\n";
      cells.push_back(trimmed(cell));
      cell.clear();
    } else {
      // No separators, quotes or line ends inside a cell: one cell per line.
      const char ch = text[i];
      cell += ch == ',' || ch == '"' || ch == '\r' ? ' ' : ch;
    }
  }
  size_t non_empty = 0;
  for (const auto& c : cells) non_empty += !c.empty();
  lmtrain::fuzz::expect_only_lmtrain_errors([&] {
    const auto c = dt::parse_csv_series(csv, "fuzz.csv", {4096, 0});
    check_series_values(c);
    if (c.timestamp_column == "c0") {
      if (non_empty == 0 || c.series.size() != 1) __builtin_trap();
      for (const auto& cell : cells) {
        if (!cell.empty() && !dt::is_timestamp_cell(cell)) __builtin_trap();
      }
    } else if (c.timestamp_column.empty()) {
      // A series: every non-empty cell became a value.
      if (c.series.size() != 2) __builtin_trap();
      size_t valid = 0;
      for (uint8_t v : c.series[0].valid) valid += v;
      if (valid != non_empty) __builtin_trap();
    } else {
      __builtin_trap();
    }
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  lmtrain::fuzz::expect_only_lmtrain_errors([&] {
    check_series_values(dt::parse_csv_series(text, "fuzz.csv", {4096, 0}));
  });
  check_first_column_detection(text);
  // Words in a timestamp are read in any case.
  std::string upper = text;
  for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (dt::is_timestamp_cell(text) != dt::is_timestamp_cell(upper)) __builtin_trap();
  return 0;
}
