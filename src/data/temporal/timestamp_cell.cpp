#include "data/temporal/timestamp_cell.h"

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <string>

namespace lmtrain::data::temporal {
namespace {

// The full name, or its first three letters or more ("sep", "sept").
bool is_month_name(const std::string& w) {
  const auto months = {"january", "february", "march",     "april",   "may",      "june",
                       "july",    "august",   "september", "october", "november", "december"};
  return std::any_of(months.begin(), months.end(), [&](std::string_view m) {
    return w == m || (w.size() >= 3 && w.size() < m.size() && m.substr(0, w.size()) == w);
  });
}

// Words a timestamp may hold besides months and 'T': the zone letter Z, AM/PM, UTC/GMT,
// weekdays.
bool is_time_word(const std::string& w) {
  const auto words = {"z",         "am",       "pm",     "utc",      "gmt",   "mon",    "tue",
                      "wed",       "thu",      "fri",    "sat",      "sun",   "monday", "tuesday",
                      "wednesday", "thursday", "friday", "saturday", "sunday"};
  return std::any_of(words.begin(), words.end(), [&](std::string_view x) { return w == x; });
}

}  // namespace

bool is_timestamp_cell(std::string_view cell) {
  int digit_runs = 0, dots = 0;
  bool separator = false, month = false;  // separator: a '-', '/' or ':'
  for (size_t i = 0; i < cell.size();) {
    const auto c = static_cast<unsigned char>(cell[i]);
    if (std::isdigit(c)) {
      ++digit_runs;
      while (i < cell.size() && std::isdigit(static_cast<unsigned char>(cell[i]))) ++i;
    } else if (std::isalpha(c)) {
      std::string word;
      while (i < cell.size() && std::isalpha(static_cast<unsigned char>(cell[i]))) {
        word += static_cast<char>(std::tolower(static_cast<unsigned char>(cell[i++])));
      }
      if (is_month_name(word)) {
        month = true;
      } else if (word == "t") {
        separator = true;  // ISO 8601's date-time separator: "20240131T1200"
      } else if (!is_time_word(word)) {
        return false;
      }
    } else {
      if (c == '-' || c == '/' || c == ':') {
        separator = true;
      } else if (c == '.') {
        ++dots;
      } else if (c != ' ' && c != ',' && c != '+') {
        return false;
      }
      ++i;
    }
  }
  return (month && digit_runs >= 1) || (separator && digit_runs >= 2) ||
         (dots >= 2 && digit_runs >= 3);
}

}  // namespace lmtrain::data::temporal
