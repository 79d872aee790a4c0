// Series from a CSV file (issue 26): a header row naming the columns, then one row per time
// step. A timestamp column is skipped: a column named time, timestamp, date or datetime (any
// case), or a first column whose every non-empty cell is a date or time (timestamp_cell.h), by
// its whole content, never by one cell. Every other column is a univariate series of numbers,
// named by its header; a cell that is neither is an error naming it. An empty cell is a missing
// value (masked: value 0, valid 0). Cells may be quoted ("a,b", "" for a quote); a quoted cell
// cannot span lines.
#pragma once
#include <string>
#include <vector>

#include "data/temporal/series_checks.h"
#include "data/temporal/temporal_sample.h"

namespace lmtrain::data::temporal {

struct CsvSeries {
  std::vector<std::string> names;    // the series' column headers
  std::vector<SeriesValues> series;  // one per column, in column order
  std::string timestamp_column;      // the header of the skipped column, "" when none
};

// Error (bad data, exit 1) naming the file and the line and column (header) for: no header, a row
// with another number of cells than the header (ragged), a cell that is not a number (saying why
// when it holds a ';' or a tab, or is hexadecimal), a first column of timestamps with a cell that
// is not one, NaN or inf, an unterminated quote, no data rows, a column without any value, a series
// longer than options.max_length.
CsvSeries read_csv_series(const std::string& path, const ReadOptions& options);
// The same from the file's text (`path` only names it in errors).
CsvSeries parse_csv_series(const std::string& text, const std::string& path,
                           const ReadOptions& options);

}  // namespace lmtrain::data::temporal
