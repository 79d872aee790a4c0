// Values out of Arrow's column arrays, for the parquet readers (parquet_file.cpp walks the file
// and its row groups; parquet_columns.cpp reads the arrays a row group gives back). Arrow's types
// are only declared here, so this header compiles without Arrow's (C++20) headers; the two
// parquet sources that include it are the ones compiled against them (CMakeLists.txt).
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string_view>

namespace arrow {
class Array;
class DataType;
}  // namespace arrow

namespace lmtrain::data {

// A text column: a string type (string, large_string, string_view), or a dictionary of one (a
// categorical column: each row an index into a table of distinct strings, as pandas and
// dictionary_encode() write repeated text).
bool parquet_is_text_type(const arrow::DataType& type);

// Row i of a text column's chunk; nullopt for a null (an index or a dictionary entry).
std::optional<std::string_view> parquet_text_at(const arrow::Array& chunk, int64_t i);

// Row i of a nested column's chunk as JSON (see for_each_parquet_json_row in parquet_file.h);
// `depth` bounds the recursion a hostile schema could ask for. Throws lmtrain::Error for a type
// without a JSON form (naming it).
nlohmann::json parquet_json_value(const arrow::Array& a, int64_t i, int depth);

}  // namespace lmtrain::data
