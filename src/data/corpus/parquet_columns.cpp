// Compiled as C++20 against Arrow's headers (CMakeLists.txt), as parquet_file.cpp is.
#include "data/corpus/parquet_columns.h"

#if LMTRAIN_PARQUET

#include <arrow/array.h>
#include <arrow/type.h>

#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"

namespace lmtrain::data {
namespace {

bool is_string_type(arrow::Type::type t) {
  return t == arrow::Type::STRING || t == arrow::Type::LARGE_STRING ||
         t == arrow::Type::STRING_VIEW;
}

}  // namespace

bool parquet_is_text_type(const arrow::DataType& type) {
  if (type.id() == arrow::Type::DICTIONARY) {
    return is_string_type(static_cast<const arrow::DictionaryType&>(type).value_type()->id());
  }
  return is_string_type(type.id());
}

std::optional<std::string_view> parquet_text_at(const arrow::Array& chunk, int64_t i) {
  if (chunk.IsNull(i)) return std::nullopt;
  switch (chunk.type_id()) {
    case arrow::Type::STRING:
      return static_cast<const arrow::StringArray&>(chunk).GetView(i);
    case arrow::Type::LARGE_STRING:
      return static_cast<const arrow::LargeStringArray&>(chunk).GetView(i);
    case arrow::Type::STRING_VIEW:
      return static_cast<const arrow::StringViewArray&>(chunk).GetView(i);
    case arrow::Type::DICTIONARY: {
      const auto& d = static_cast<const arrow::DictionaryArray&>(chunk);
      return parquet_text_at(*d.dictionary(), d.GetValueIndex(i));
    }
    default:  // open_impl accepts no other type
      return std::nullopt;
  }
}

nlohmann::json parquet_json_value(const arrow::Array& a, int64_t i, int depth) {
  if (depth > 64) throw Error("nested deeper than 64 levels");
  if (a.IsNull(i)) return nullptr;
  switch (a.type_id()) {
    case arrow::Type::STRING:
    case arrow::Type::LARGE_STRING:
    case arrow::Type::STRING_VIEW:
    case arrow::Type::DICTIONARY: {
      if (a.type_id() == arrow::Type::DICTIONARY && !parquet_is_text_type(*a.type())) break;
      const auto v = parquet_text_at(a, i);
      return v ? nlohmann::json(std::string(*v)) : nlohmann::json(nullptr);
    }
    case arrow::Type::BOOL:
      return static_cast<const arrow::BooleanArray&>(a).Value(i);
    case arrow::Type::INT8:
      return static_cast<const arrow::Int8Array&>(a).Value(i);
    case arrow::Type::INT16:
      return static_cast<const arrow::Int16Array&>(a).Value(i);
    case arrow::Type::INT32:
      return static_cast<const arrow::Int32Array&>(a).Value(i);
    case arrow::Type::INT64:
      return static_cast<const arrow::Int64Array&>(a).Value(i);
    case arrow::Type::UINT8:
      return static_cast<const arrow::UInt8Array&>(a).Value(i);
    case arrow::Type::UINT16:
      return static_cast<const arrow::UInt16Array&>(a).Value(i);
    case arrow::Type::UINT32:
      return static_cast<const arrow::UInt32Array&>(a).Value(i);
    case arrow::Type::UINT64:
      return static_cast<const arrow::UInt64Array&>(a).Value(i);
    case arrow::Type::FLOAT:
      return static_cast<const arrow::FloatArray&>(a).Value(i);
    case arrow::Type::DOUBLE:
      return static_cast<const arrow::DoubleArray&>(a).Value(i);
    case arrow::Type::LIST: {
      const auto& l = static_cast<const arrow::ListArray&>(a);
      auto out = nlohmann::json::array();
      const int64_t at = l.value_offset(i), n = l.value_length(i);
      for (int64_t k = 0; k < n; ++k)
        out.push_back(parquet_json_value(*l.values(), at + k, depth + 1));
      return out;
    }
    case arrow::Type::LARGE_LIST: {
      const auto& l = static_cast<const arrow::LargeListArray&>(a);
      auto out = nlohmann::json::array();
      const int64_t at = l.value_offset(i), n = l.value_length(i);
      for (int64_t k = 0; k < n; ++k)
        out.push_back(parquet_json_value(*l.values(), at + k, depth + 1));
      return out;
    }
    case arrow::Type::STRUCT: {
      const auto& s = static_cast<const arrow::StructArray&>(a);
      auto out = nlohmann::json::object();
      for (int k = 0; k < s.num_fields(); ++k) {
        auto v = parquet_json_value(*s.field(k), i, depth + 1);
        if (!v.is_null()) out[s.struct_type()->field(k)->name()] = std::move(v);
      }
      return out;
    }
    default:
      break;
  }
  throw Error("type " + a.type()->ToString() + " has no JSON form here");
}

}  // namespace lmtrain::data

#endif  // LMTRAIN_PARQUET
