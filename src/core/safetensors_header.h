// The header of a safetensors file (see core/safetensors.h), parsed and validated without
// libtorch: the part of the reader that faces untrusted bytes, and what fuzz/ exercises.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace lmtrain::core {

// One tensor's header entry.
struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // as spelled in the file, e.g. "BF16"
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets into the data section
  uint64_t end = 0;
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;  // in data order
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;  // file offset of the data section (8 + header length)
};

// Bytes per element of a safetensors dtype name ("F32" -> 4); nullopt for a dtype lmtrain
// cannot load.
std::optional<size_t> safetensors_element_size(const std::string& dtype);
// "F64 F32 ..." for messages.
std::string safetensors_supported_dtypes();

// Parses and validates the header of a whole file held in data[0, file_size): length prefix,
// JSON, dtypes, shapes x dtype = byte spans, data_offsets tiling the data section exactly.
// Throws lmtrain::Error naming `path` (and the tensor).
SafetensorsHeader parse_safetensors_header(const std::string& path, const uint8_t* data,
                                           size_t file_size);

}  // namespace lmtrain::core
