#include "data/temporal/csv_series.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>

#include "core/error.h"
#include "core/fs.h"
#include "data/temporal/timestamp_cell.h"

namespace lmtrain::data::temporal {
namespace {

std::string csv_trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// The cells of one line (without its newline), unquoted and trimmed.
std::vector<std::string> split_csv_line(const std::string& line, const std::string& where) {
  std::vector<std::string> cells;
  std::string cell;
  bool quoted = false, was_quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char ch = line[i];
    if (quoted) {
      if (ch == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cell += '"';
        ++i;
      } else if (ch == '"') {
        quoted = false;
      } else {
        cell += ch;
      }
    } else if (ch == '"' && csv_trim(cell).empty()) {
      quoted = was_quoted = true;
      cell.clear();
    } else if (ch == ',') {
      cells.push_back(was_quoted ? cell : csv_trim(cell));
      cell.clear();
      was_quoted = false;
    } else {
      cell += ch;
    }
  }
  if (quoted) throw Error(where + ": a quoted cell is not closed on its line");
  cells.push_back(was_quoted ? cell : csv_trim(cell));
  return cells;
}

// A whole cell as a double: from_chars takes no leading '+', so it is skipped here.
// A value beyond double's range becomes +-inf (refused later, naming the cell), a tiny one 0.
bool csv_number(const std::string& cell, double& v) {
  if (cell.empty() || (cell[0] == '+' && cell.size() > 1 && cell[1] == '-')) return false;
  const char* b = cell.data() + (cell[0] == '+' ? 1 : 0);
  const char* e = cell.data() + cell.size();
  const auto r = std::from_chars(b, e, v);
  if (r.ptr != e) return false;
  if (r.ec == std::errc::result_out_of_range) v = std::strtod(std::string(b, e).c_str(), nullptr);
  return r.ec == std::errc() || r.ec == std::errc::result_out_of_range;
}

bool is_timestamp_name(std::string name) {
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return name == "time" || name == "timestamp" || name == "date" || name == "datetime";
}

// What a cell that is not a number may have meant, for the message that names it.
std::string not_a_number_hint(const std::string& cell) {
  if (cell.find(';') != std::string::npos || cell.find('\t') != std::string::npos) {
    return " (cells are separated by commas; this one holds a ';' or a tab: write the file with "
           "',' between cells)";
  }
  const size_t sign = !cell.empty() && (cell[0] == '-' || cell[0] == '+') ? 1 : 0;
  if (cell.size() > sign + 1 && cell[sign] == '0' && (cell[sign + 1] | 0x20) == 'x') {
    return " (hexadecimal is not read: write the value in decimal)";
  }
  return " (a series column holds decimal numbers; fix the cell, or leave a missing value "
         "empty)";
}

// The timestamp column: one named time, timestamp, date or datetime, else a first column whose
// every non-empty cell is a timestamp (timestamp_cell.h), never one decided by a single cell.
// -1: none.
int64_t timestamp_column(const std::vector<std::string>& header,
                         const std::vector<std::vector<std::string>>& rows) {
  for (size_t c = 0; c < header.size(); ++c) {
    if (is_timestamp_name(header[c])) return static_cast<int64_t>(c);
  }
  bool any = false;
  double v = 0;
  for (const auto& row : rows) {
    if (row[0].empty()) continue;
    if (csv_number(row[0], v) || !is_timestamp_cell(row[0])) return -1;
    any = true;
  }
  return any ? 0 : -1;
}

// A first column that is mostly timestamps but not all: its first cell that is not one, so that
// the message names the odd cell out rather than the first timestamp. -1 when the column holds
// more numbers than timestamps (then it is a series column, and a bad cell is named as not a
// number).
int64_t odd_timestamp_row(const std::vector<std::vector<std::string>>& rows) {
  int64_t timestamps = 0, numbers = 0, first_odd = -1;
  double v = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    const std::string& cell = rows[r][0];
    if (cell.empty()) continue;
    if (csv_number(cell, v)) {
      ++numbers;
    } else if (is_timestamp_cell(cell)) {
      ++timestamps;
      continue;
    }
    if (first_odd < 0) first_odd = static_cast<int64_t>(r);
  }
  return timestamps > numbers ? first_odd : -1;
}

}  // namespace

CsvSeries parse_csv_series(const std::string& text, const std::string& path,
                           const ReadOptions& options) {
  // The non-blank lines with their numbers.
  std::vector<std::pair<size_t, std::string>> lines;
  size_t line_no = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    ++line_no;
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (csv_trim(line).empty()) continue;
    lines.emplace_back(line_no, std::move(line));
  }
  if (lines.empty()) throw Error(path + ": an empty CSV file (a header row is required)");
  const auto where = [&](size_t i) { return path + ":" + std::to_string(lines[i].first); };
  const std::vector<std::string> header = split_csv_line(lines[0].second, where(0));
  const size_t n_cols = header.size();
  double v = 0;
  bool header_numeric = true;
  for (const auto& h : header) header_numeric = header_numeric && csv_number(h, v);
  if (header_numeric) {
    throw Error(where(0) +
                ": the first row holds only numbers; a header row naming the "
                "columns is required");
  }
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 1; i < lines.size(); ++i) {
    rows.push_back(split_csv_line(lines[i].second, where(i)));
    if (rows.back().size() != n_cols) {
      throw Error(where(i) + ": " + std::to_string(rows.back().size()) +
                  " cells where the header has " + std::to_string(n_cols) + " (ragged row)");
    }
  }
  if (rows.empty()) throw Error(path + ": no data rows after the header");

  const int64_t ts_col = timestamp_column(header, rows);
  if (ts_col < 0) {
    const int64_t odd = odd_timestamp_row(rows);
    if (odd >= 0) {
      const std::string& cell = rows[static_cast<size_t>(odd)][0];
      throw Error(where(static_cast<size_t>(odd) + 1) + " column 1 (\"" + header[0] + "\"): \"" +
                  cell +
                  "\" is not a timestamp, as the column's other cells are (a date or time "
                  "such as 2024-01-31 or 2024-01-31T12:00:00); fix the cell, or leave it "
                  "empty");
    }
  }
  CsvSeries out;
  if (ts_col >= 0) out.timestamp_column = header[static_cast<size_t>(ts_col)];
  const int64_t length = static_cast<int64_t>(rows.size());
  for (size_t c = 0; c < n_cols; ++c) {
    if (static_cast<int64_t>(c) == ts_col) continue;
    const std::string column = "column " + std::to_string(c + 1) + " (\"" + header[c] + "\")";
    SeriesValues s;
    s.length = length;
    s.values.assign(static_cast<size_t>(length), 0.0f);
    s.valid.assign(static_cast<size_t>(length), 0);
    for (size_t r = 0; r < rows.size(); ++r) {
      const std::string& cell = rows[r][c];
      if (cell.empty()) continue;  // missing
      const std::string at = where(r + 1) + " " + column;
      if (!csv_number(cell, v)) {
        throw Error(at + ": \"" + cell + "\" is not a number" + not_a_number_hint(cell));
      }
      s.values[r] = checked_series_value(v, at);
      s.valid[r] = 1;
    }
    check_series(s, path + " " + column, options);
    out.names.push_back(header[c]);
    out.series.push_back(std::move(s));
  }
  if (out.series.empty()) throw Error(path + ": no series column (only a timestamp column)");
  return out;
}

CsvSeries read_csv_series(const std::string& path, const ReadOptions& options) {
  return parse_csv_series(core::read_file(path), path, options);
}

}  // namespace lmtrain::data::temporal
