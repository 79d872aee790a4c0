// Whether a CSV cell reads as a date or time (csv_series.h's timestamp column): "2024-01-31",
// "31/01/2024", "2024-01-31T12:00:00.5+02:00", "12:30", "31.01.2024", "Jan 31 2024 3:00 PM".
// Runs of digits joined by - / : . , + space, T and Z, where the only words are month and
// weekday names, AM/PM and UTC/GMT; it needs a '-', '/', ':' or 'T' between two runs of digits,
// three runs joined by dots, or a month name. A number with a typo ("1.5abc", "0x1A", "3x") is
// never one; a plain number may be ("-1.5"): the CSV reader takes numbers as numbers first.
#pragma once
#include <string_view>

namespace lmtrain::data::temporal {

bool is_timestamp_cell(std::string_view cell);

}  // namespace lmtrain::data::temporal
