#include "core/safetensors_header.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace lmtrain::core {
namespace {

// Hugging Face's reader refuses headers above 100 MB; a larger length means a corrupt prefix.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

struct DtypeSize {
  const char* name;
  size_t bytes;
};

constexpr DtypeSize kDtypeSizes[] = {
    {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},
    {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1},
};

uint64_t read_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

SafetensorsHeader parse_safetensors_header(const std::string& path, const uint8_t* data,
                                           size_t file_size) {
  const std::string where = "safetensors file " + path;
  if (file_size < 8) {
    throw Error(where + " is only " + std::to_string(file_size) +
                " bytes; too short for the 8-byte header length (truncated or not safetensors)");
  }
  const uint64_t header_len = read_le64(data);
  if (header_len > kMaxHeaderBytes) {
    throw Error(where + " declares a " + std::to_string(header_len) +
                "-byte header, which is implausible: the file is corrupt or not safetensors");
  }
  if (header_len > file_size - 8) {
    throw Error(where + " is truncated: its header needs " + std::to_string(header_len) +
                " bytes but only " + std::to_string(file_size - 8) + " follow the length prefix");
  }
  const char* hbegin = reinterpret_cast<const char*>(data + 8);
  nlohmann::ordered_json header;
  try {
    header = nlohmann::ordered_json::parse(hbegin, hbegin + header_len);
  } catch (const nlohmann::json::exception& e) {
    throw Error(where + " has a malformed JSON header (corrupt file?): " + e.what());
  }
  if (!header.is_object()) throw Error(where + " has a JSON header that is not an object");

  SafetensorsHeader out;
  out.data_start = 8 + header_len;
  const uint64_t data_size = file_size - out.data_start;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) throw Error(where + ": __metadata__ is not an object");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) {
          throw Error(where + ": __metadata__ value for '" + mk + "' is not a string");
        }
        out.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    const std::string what = where + ", tensor '" + key + "'";
    if (!value.is_object() || !value.contains("dtype") || !value.contains("shape") ||
        !value.contains("data_offsets")) {
      throw Error(what + ": header entry must be an object with dtype, shape and data_offsets");
    }
    SafetensorsEntry e;
    e.name = key;
    if (!value["dtype"].is_string()) throw Error(what + ": dtype is not a string");
    e.dtype = value["dtype"].get<std::string>();
    const auto element_size = safetensors_element_size(e.dtype);
    if (!element_size) {
      throw Error(what + " has dtype '" + e.dtype + "', which lmtrain cannot load (supported: " +
                  safetensors_supported_dtypes() + ")");
    }
    const auto& shape = value["shape"];
    if (!shape.is_array()) throw Error(what + ": shape is not an array");
    for (const auto& d : shape) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) {
        throw Error(what + ": shape " + shape.dump() + " has a non-integer or negative dim");
      }
      e.shape.push_back(d.get<int64_t>());
    }
    const auto& offs = value["data_offsets"];
    if (!offs.is_array() || offs.size() != 2 || !offs[0].is_number_unsigned() ||
        !offs[1].is_number_unsigned()) {
      throw Error(what + ": data_offsets must be two non-negative integers, got " + offs.dump());
    }
    e.begin = offs[0].get<uint64_t>();
    e.end = offs[1].get<uint64_t>();
    if (e.end < e.begin) throw Error(what + ": data_offsets " + offs.dump() + " end before begin");
    if (e.end > data_size) {
      throw Error(what + " ends at data byte " + std::to_string(e.end) + " but the file has only " +
                  std::to_string(data_size) + " data bytes (truncated file?)");
    }
    // numel x element size, with overflow checks: a corrupt shape must not wrap around.
    uint64_t bytes = *element_size;
    for (int64_t d : e.shape) {
      if (d != 0 && bytes > UINT64_MAX / static_cast<uint64_t>(d)) {
        throw Error(what + ": shape " + shape.dump() + " is too large");
      }
      bytes *= static_cast<uint64_t>(d);
    }
    if (bytes != e.end - e.begin) {
      throw Error(what + ": shape " + shape.dump() + " x " + e.dtype + " needs " +
                  std::to_string(bytes) + " bytes but data_offsets span " +
                  std::to_string(e.end - e.begin));
    }
    out.entries.push_back(std::move(e));
  }

  // The data section must be tiled exactly, in offset order (the reference reader insists too):
  // overlaps would alias tensors, gaps and trailing bytes indicate corruption.
  std::stable_sort(
      out.entries.begin(), out.entries.end(),
      [](const SafetensorsEntry& a, const SafetensorsEntry& b) { return a.begin < b.begin; });
  uint64_t expected = 0;
  const SafetensorsEntry* prev = nullptr;
  for (const auto& e : out.entries) {
    if (e.begin < expected) {
      throw Error(where + ": tensors '" + prev->name + "' and '" + e.name +
                  "' have overlapping data_offsets");
    }
    if (e.begin > expected) {
      throw Error(where + ": unused bytes " + std::to_string(expected) + ".." +
                  std::to_string(e.begin) + " before tensor '" + e.name + "' (corrupt header?)");
    }
    expected = e.end;
    prev = &e;
  }
  if (expected != data_size) {
    throw Error(where + " has " + std::to_string(data_size - expected) +
                " bytes after the last tensor's data (corrupt header or wrong file?)");
  }
  return out;
}

std::optional<size_t> safetensors_element_size(const std::string& dtype) {
  for (const auto& d : kDtypeSizes) {
    if (dtype == d.name) return d.bytes;
  }
  return std::nullopt;
}

std::string safetensors_supported_dtypes() {
  std::string s;
  for (const auto& d : kDtypeSizes) s += (s.empty() ? "" : " ") + std::string(d.name);
  return s;
}

}  // namespace lmtrain::core
